if Code.ensure_loaded?(Nx.Backend) do
  defmodule Nx.Vulkan.Backend do
    @moduledoc """
    An `Nx` backend whose tensors live on a Vulkan device.

        Nx.default_backend(Nx.Vulkan.Backend)
        Nx.default_backend({Nx.Vulkan.Backend, device: 1})

        t = Nx.tensor([1.0, 2.0, 3.0], backend: Nx.Vulkan.Backend)
        Nx.backend_transfer(t, {Nx.Vulkan.Backend, device: 1})

    A tensor is a buffer on one device: dense, or a view of another
    tensor's buffer (a transpose or a broadcast, read through strides).
    Operations are queued on the device and return at once; only reading
    data back (`Nx.to_binary/2`, `Nx.to_number/1`, `inspect/2`, a transfer
    to another backend) waits, and only for the work it depends on.

    ## Options

      * `:device` - the index of the Vulkan device (see `Nx.Vulkan.devices/0`).
        Defaults to `Nx.Vulkan.default_device_index/0`.

    Unknown options, and devices that do not exist, raise `ArgumentError`.

    ## What runs on the device

    The runtime has kernels for every Nx type (`s8` to `u64`, `f16`,
    `bf16`, `f32`, `f64` and the complex `c64`, `c128`) where the device can
    store it (8- and 16-bit storage, `shaderFloat64` for `f64` and `c128`).
    `docs/ops.md` lists every callback and type; in short, on the device:

      * every element-wise binary and unary op, comparisons, `select`,
        `clip`, `is_nan`, `is_infinity`, `real imag conjugate phase`, with
        Nx type promotion (inputs are converted on the device) and
        broadcasting through strides; `as_type` and `bitcast`;
      * reductions over any axes (`sum product reduce_max reduce_min all
        any argmax argmin`, and `reduce`/`window_reduce` whose function is
        add, multiply, max or min), window reductions and
        `window_scatter_max`/`window_scatter_min`, cumulative ops;
      * `dot` with any contraction and batch axes, `conv` with every option,
        `fft`/`ifft` (and `fft2`/`ifft2`);
      * `sort argsort top_k`, `gather take take_along_axis indexed_add
        indexed_put`;
      * `slice reverse pad concatenate stack put_slice to_batched`, `iota`
        and `eye`; `reshape` and `squeeze` are free, and so are `transpose`
        and `broadcast` of a device tensor: they make a view, which
        element-wise ops, `select`, `clip`, conversions, reductions, `dot`
        and the strided copies read in place, and every other use copies
        into a dense buffer first;
      * `constant`, `from_binary`, `to_binary` (reading only `limit`
        elements) and `backend_copy` within a device.

    Tensors made by `constant/3` (such as the scalars Nx makes from numbers)
    and single-element uploads remember their value: converting them to
    another type, broadcasting, slicing or transposing them is a device fill
    whatever their type, so `Nx.add(t, 1)` stays on the device for every
    `t` the device computes on. A one-element constant holds no device
    buffer at all: it is its value (reading it back, `reshape`, `as_type`
    and `backend_copy` are host work). Binary ops and comparisons take it
    as an immediate operand, carried in the kernel's push constants; other
    kernels read a buffer cached per device, type and value
    (`Nx.Vulkan.Scalars`). Either way a number costs no device op and no
    allocation once seen. Deallocating
    such a constant frees nothing and it stays readable. Scalars of other
    backends are converted on the host before their upload.

    When the device's memory pool is full, an allocating operation collects
    garbage (unreferenced tensors), waits for the queued work, trims the
    pool and tries again before raising `Nx.Vulkan.OutOfMemoryError`
    (`Nx.Vulkan.Memory`); the device stays usable.

    ## Host fallback

    Every other operation (`map`, the linear algebra of `Nx.LinAlg`, ...),
    and every type the device cannot store, is computed on the CPU: the tensor
    arguments are downloaded, the same callback runs on `Nx.BinaryBackend`
    and the result is uploaded to the device of the inputs. Each fallback is
    counted per op (`Nx.Vulkan.fallbacks/0`) and subject to the policy of
    `Nx.Vulkan.Fallback` (`:allow`, `:warn` or `:raise`; see
    `Nx.Vulkan.with_host_fallback/2`). Functions given to callbacks
    (`Nx.reduce/4`, `Nx.map/3`, ...) are evaluated on `Nx.BinaryBackend`
    tensors. Optional callbacks (`optional/3`) and blocks (`block/4`) run
    their default implementation on the host the same way, counted under
    their own name.

    A type that cannot be stored on a Vulkan device at all raises an
    `ArgumentError` naming the type, the operation and the device.

    ## Inspect

    Inspected tensors show `Nx.Vulkan.Backend<device N>` before their data
    unless `config :nx_vulkan, :add_backend_on_inspect, false`, in which
    case the text is exactly what `Nx.BinaryBackend` prints.
    """

    @behaviour Nx.Backend

    @enforce_keys [:ref, :device]
    defstruct [:ref, :device, value: nil, strides: nil]

    @typedoc """
    The data of a tensor: `ref` is the tensor resource, `device` the index
    of its device, and `value` the value every element is known to equal
    (tensors made by `constant/3`, single-element uploads), or `nil`.
    `ref` is `nil` for a one-element constant, which holds no device
    buffer: `value` is then the tensor, and kernels read it from
    `Nx.Vulkan.Scalars`' cached buffer. A constant of more elements is a
    view (below) of that cached element, on a handle of its own, with
    `strides` all 0 and `value` set.

    `strides` is `nil` for a buffer laid out row-major in the tensor's
    shape (vectorized axes first). A transpose or a broadcast is a view
    instead: the same buffer, with `strides` the element stride of each
    axis (the vectorized ones first; 0 along broadcast axes), which
    kernels that take strided operands read in place and every other use
    copies into a dense buffer first.
    """
    @type t :: %__MODULE__{
            ref: reference | nil,
            device: non_neg_integer,
            value: nil | number | Complex.t() | :nan | :infinity | :neg_infinity,
            strides: nil | [integer]
          }

    alias Nx.Tensor, as: T
    # Every NIF call goes through Nx.Vulkan.Capture (see Nx.Vulkan.Compiler).
    alias Nx.Vulkan.Capture, as: NIF
    alias Nx.Vulkan.Fallback

    require Nx.Vulkan.Backend.Compat
    import Nx.Vulkan.Backend.Compat, only: [impl_if_callback: 2]

    # Uploads larger than this run on a dirty scheduler.
    @dirty_upload_bytes 1_048_576

    # The runtime's maximum rank.
    @max_rank 16

    # The largest finite f32.
    @f32_max 3.4028234663852886e38

    @nif_types %{
      {:s, 8} => :s8,
      {:s, 16} => :s16,
      {:s, 32} => :s32,
      {:s, 64} => :s64,
      {:u, 8} => :u8,
      {:u, 16} => :u16,
      {:u, 32} => :u32,
      {:u, 64} => :u64,
      {:f, 16} => :f16,
      {:bf, 16} => :bf16,
      {:f, 32} => :f32,
      {:f, 64} => :f64,
      {:c, 64} => :c64,
      {:c, 128} => :c128
    }

    ## Options

    impl_if_callback(:init, 1)

    # Nx calls init/1 whenever it reads a global default backend (for
    # every number it turns into a tensor): the common case first.
    def init([]), do: []

    def init(opts) when is_list(opts) do
      opts = Keyword.validate!(opts, [:device])

      case Keyword.fetch(opts, :device) do
        :error ->
          opts

        {:ok, nil} ->
          Keyword.delete(opts, :device)

        {:ok, index} when is_integer(index) and index >= 0 ->
          count = device_count()

          if index >= count do
            raise ArgumentError,
                  "Nx.Vulkan.Backend: device #{index} does not exist " <>
                    "(#{count} Vulkan device(s) found, see Nx.Vulkan.devices/0)"
          end

          opts

        {:ok, other} ->
          raise ArgumentError,
                "Nx.Vulkan.Backend: :device must be a non-negative integer, got: #{inspect(other)}"
      end
    end

    def init(other) do
      raise ArgumentError,
            "Nx.Vulkan.Backend: expected a keyword list of options, got: #{inspect(other)}"
    end

    defp device_count do
      case :persistent_term.get({__MODULE__, :device_count}, nil) do
        nil ->
          count = NIF.device_count()
          :persistent_term.put({__MODULE__, :device_count}, count)
          count

        count ->
          count
      end
    end

    # The device index of backend options. Options reach creation callbacks
    # without init/1 (Nx passes `backend: {mod, opts}` through as is), so
    # they are validated here too.
    defp opts_device([]), do: Nx.Vulkan.default_device_index()

    defp opts_device([device: index] = opts) when is_integer(index) and index >= 0 do
      if index < device_count(), do: index, else: opts_device(init(opts))
    end

    defp opts_device(opts) do
      case Keyword.get(init(opts), :device) do
        nil -> Nx.Vulkan.default_device_index()
        index -> index
      end
    end

    ## Creation

    impl_if_callback(:constant, 3)

    # The numbers Nx turns into tensors most often (Nx.add(x, 1),
    # Nx.multiply(g, 0.1): s64 and f32 scalars on the default device): the
    # value as stored, without the general clause's conversions.
    def constant(%T{shape: {}, type: {:f, 32}} = out, number, [])
        when is_float(number) and abs(number) <= @f32_max do
      <<value::float-32-native>> = <<number::float-32-native>>
      %{out | data: %__MODULE__{ref: nil, device: Nx.Vulkan.default_device_index(), value: value}}
    end

    def constant(%T{shape: {}, type: {:s, 64}} = out, number, []) when is_integer(number) do
      <<value::signed-64-native>> = <<number::signed-64-native>>
      %{out | data: %__MODULE__{ref: nil, device: Nx.Vulkan.default_device_index(), value: value}}
    end

    def constant(%T{type: type} = out, number, backend_options) do
      index = opts_device(backend_options)
      nif_type = nif_type!(type, :constant, index)
      bytes = scalar_bytes(type, number)

      # The value as stored (rounded to the type), for later conversions.
      # One element is a constant without a buffer, more a view of a cached
      # element (see the moduledoc).
      case Nx.size(out) do
        1 when byte_size(bytes) <= 8 ->
          constant_of(out, index, bytes)

        count ->
          constant_view(out, index, nif_type, bytes) ||
            wrap(out, fill(index, nif_type, count, bytes), index, single_value(type, bytes))
      end
    end

    impl_if_callback(:from_binary, 3)

    def from_binary(%T{type: type} = out, binary, backend_options) when is_binary(binary) do
      index = opts_device(backend_options)
      nif_type = nif_type!(type, :from_binary, index)
      wrap(out, upload(index, nif_type, binary), index, single_value(type, binary))
    end

    def from_binary(%T{} = out, iodata, backend_options) do
      from_binary(out, IO.iodata_to_binary(iodata), backend_options)
    end

    impl_if_callback(:iota, 3)

    def iota(%T{type: type, shape: shape} = out, axis, backend_options) do
      index = opts_device(backend_options)
      nif_type = nif_type!(type, :iota, index)

      if compute_type?(index, nif_type) and tuple_size(shape) <= @max_rank do
        {nif_shape, nif_axis} =
          case axis do
            nil -> {[Nx.size(shape)], 0}
            axis -> {Tuple.to_list(shape), axis}
          end

        wrap(
          out,
          alloc(index, fn -> NIF.iota(Nx.Vulkan.device(index), nif_type, nif_shape, nif_axis) end),
          index
        )
      else
        host_create(:iota, out, [axis], index, no_kernel(:iota, type, index))
      end
    end

    impl_if_callback(:eye, 2)

    def eye(%T{type: type, shape: shape} = out, backend_options) do
      index = opts_device(backend_options)
      nif_type = nif_type!(type, :eye, index)
      rank = tuple_size(shape)

      cond do
        rank < 2 or rank > @max_rank or not copy_type?(index, nif_type) ->
          host_create(:eye, out, [], index, no_kernel(:eye, type, index))

        Nx.size(shape) == 0 ->
          empty(out, index)

        true ->
          # eye[..., i, j] = pattern[(n - 1) - i + j], where the pattern is
          # n - 1 zeros, a one and m - 1 zeros: a strided read of a tiny buffer.
          n = elem(shape, rank - 2)
          m = elem(shape, rank - 1)
          zero = scalar_bytes(type, 0)

          pattern =
            :binary.copy(zero, n - 1) <> scalar_bytes(type, 1) <> :binary.copy(zero, m - 1)

          ref = upload(index, nif_type, pattern)
          strides = List.duplicate(0, rank - 2) ++ [-1, 1]
          wrap(out, strided_read(index, Tuple.to_list(shape), ref, n - 1, strides), index)
      end
    end

    ## Transfer, memory and inspection

    impl_if_callback(:to_binary, 2)

    def to_binary(%T{type: type, data: %__MODULE__{ref: nil, value: value}}, limit),
      do: if(limit >= 1, do: scalar_bytes(type, value), else: "")

    # A constant of more elements (constant_view/4): its value repeated, on
    # the host, as the one-element buffer it views holds it.
    def to_binary(
          %T{type: type, data: %__MODULE__{ref: ref, value: value, strides: [_ | _]}} = tensor,
          limit
        )
        when value != nil do
      # Raises on a deallocated tensor, like every other use.
      _ = NIF.tensor_info(ref)
      :binary.copy(scalar_bytes(type, value), min(limit, flat_size(tensor)))
    end

    def to_binary(%T{data: %__MODULE__{ref: ref, device: index, strides: nil}} = tensor, limit) do
      count = min(limit, flat_size(tensor))
      Nx.Vulkan.Telemetry.download_span(index, count, fn -> download(ref, 0, count) end)
    end

    # A view: its elements in order, into a dense buffer first.
    def to_binary(%T{data: %__MODULE__{device: index}} = tensor, limit) do
      dense = materialize(tensor)

      try do
        to_binary(%{tensor | data: %__MODULE__{ref: dense, device: index}}, limit)
      after
        NIF.deallocate(dense)
      end
    end

    impl_if_callback(:backend_deallocate, 1)

    # A constant without a buffer has nothing to free (and stays readable).
    def backend_deallocate(%T{data: %__MODULE__{ref: nil}}), do: :ok
    def backend_deallocate(%T{data: %__MODULE__{ref: ref}}), do: NIF.deallocate(ref)

    impl_if_callback(:backend_copy, 3)

    def backend_copy(%T{data: %__MODULE__{ref: nil} = data} = tensor, backend, opts) do
      if backend == __MODULE__,
        do: %{tensor | data: %{data | device: opts_device(opts)}},
        else: backend.from_binary(tensor, read_all(tensor), opts)
    end

    def backend_copy(
          %T{data: %__MODULE__{ref: ref, device: index} = data} = tensor,
          backend,
          opts
        ) do
      if backend == __MODULE__ do
        target = opts_device(opts)

        if target == index do
          %{tensor | data: %{data | ref: alloc(index, fn -> NIF.copy(ref) end)}}
        else
          from_binary(tensor, read_all(tensor), device: target)
        end
      else
        backend.from_binary(tensor, read_all(tensor), opts)
      end
    end

    impl_if_callback(:backend_transfer, 3)

    def backend_transfer(%T{data: %__MODULE__{device: index}} = tensor, backend, opts) do
      if backend == __MODULE__ and opts_device(opts) == index do
        tensor
      else
        try do
          backend_copy(tensor, backend, opts)
        after
          backend_deallocate(tensor)
        end
      end
    end

    impl_if_callback(:inspect, 2)

    def inspect(%T{data: %__MODULE__{device: index}} = tensor, inspect_opts) do
      size = Nx.size(tensor)
      limit = if inspect_opts.limit == :infinity, do: size, else: inspect_opts.limit + 1
      binary = to_binary(tensor, min(limit, size))
      doc = Nx.Backend.inspect(tensor, binary, inspect_opts)

      if Application.get_env(:nx_vulkan, :add_backend_on_inspect, true) do
        Inspect.Algebra.concat(["Nx.Vulkan.Backend<device #{index}>", Inspect.Algebra.line(), doc])
      else
        doc
      end
    end

    impl_if_callback(:to_batched, 3)

    def to_batched(%T{shape: out_shape, type: type} = out, %T{} = tensor, opts) do
      index = device_of(tensor)
      nif_type = nif_type!(type, :to_batched, index)
      batch_size = elem(out_shape, 0)
      axis_size = elem(tensor.shape, 0)
      remainder = rem(axis_size, batch_size)
      full = div(axis_size, batch_size)
      per_batch = Nx.size(out_shape)
      dims = Tuple.to_list(out_shape)
      native? = copy_type?(index, nif_type) and length(dims) <= @max_rank
      ref = device_ref!(tensor, index)

      range =
        if remainder != 0 and opts[:leftover] == :repeat, do: 0..full, else: 0..(full - 1)//1

      Stream.map(range, fn
        ^full when native? ->
          # The last rows followed by the first ones: two copies into a
          # fresh tensor.
          before = full * per_batch
          available = Nx.size(tensor) - before
          dst = alloc(index, fn -> NIF.empty(Nx.Vulkan.device(index), nif_type, per_batch) end)
          NIF.copy_into(dst, 0, [1], [available], ref, before, [1])
          NIF.copy_into(dst, available, [1], [per_batch - available], ref, 0, [1])
          wrap(out, dst, index)

        ^full ->
          # The last rows followed by the first ones, read through the host.
          Fallback.record!(:to_batched, no_kernel(:copy, type, index))
          before = full * per_batch
          available = Nx.size(tensor) - before
          bin = download(ref, before, available) <> download(ref, 0, per_batch - available)
          wrap(out, upload(index, nif_type, bin), index)

        i when native? ->
          wrap(out, strided_read(index, dims, ref, i * per_batch, dense_strides(dims)), index)

        i ->
          Fallback.record!(:to_batched, no_kernel(:copy, type, index))
          wrap(out, upload(index, nif_type, download(ref, i * per_batch, per_batch)), index)
      end)
    end

    impl_if_callback(:to_pointer, 2)

    @spec to_pointer(Nx.Tensor.t(), keyword) :: no_return
    def to_pointer(_tensor, _opts) do
      raise ArgumentError,
            "Nx.Vulkan.Backend does not support pointers: its tensors live in Vulkan " <>
              "device memory owned by the runtime (use Nx.to_binary/2 or Nx.backend_transfer/2)"
    end

    impl_if_callback(:from_pointer, 5)

    @spec from_pointer(term, term, term, keyword, keyword) :: no_return
    def from_pointer(_pointer, _type, _shape, _backend_opts, _opts) do
      raise ArgumentError,
            "Nx.Vulkan.Backend does not support pointers: its tensors live in Vulkan " <>
              "device memory owned by the runtime (use Nx.from_binary/3)"
    end

    ## Shape and type

    impl_if_callback(:reshape, 2)
    def reshape(out, tensor), do: same_data(out, tensor)

    impl_if_callback(:squeeze, 3)
    def squeeze(out, tensor, _axes), do: same_data(out, tensor)

    impl_if_callback(:as_type, 2)

    def as_type(%T{type: type} = out, %T{type: type} = tensor), do: same_data(out, tensor)

    # A constant without a buffer converts on the host into another.
    def as_type(
          %T{type: type} = out,
          %T{type: from, data: %__MODULE__{ref: nil, device: index, value: value}} = tensor
        ) do
      case convert_value(value, from, type) do
        bytes when byte_size(bytes) <= 8 and is_map_key(@nif_types, type) ->
          constant_of(out, index, bytes)

        _ ->
          as_type_device(out, tensor)
      end
    end

    def as_type(out, tensor), do: as_type_device(out, tensor)

    defp as_type_device(%T{type: type} = out, %T{} = tensor) do
      index = device_of(tensor)
      nif_type = nif_type!(type, :as_type, index)

      case operand(tensor, nif_type, index) do
        {:ok, ref} ->
          wrap(out, ref, index, converted_value(tensor, type))

        :error ->
          host(:as_type, [out, tensor], no_kernel(:as_type, {tensor.type, type}, index))
      end
    end

    impl_if_callback(:bitcast, 2)

    # Reinterpreting bits of the same width is free: a new handle on the
    # same buffer (a known constant value no longer applies).
    def bitcast(
          %T{type: {_, bits} = type} = out,
          %T{type: {_, bits}, data: %__MODULE__{}} = tensor
        ) do
      %__MODULE__{device: index} = tensor.data
      ref = device_ref!(tensor, index)
      wrap(out, NIF.reinterpret(ref, nif_type!(type, :bitcast, index)), index)
    end

    def bitcast(out, tensor), do: host(:bitcast, [out, tensor], "element sizes differ")

    impl_if_callback(:broadcast, 4)

    def broadcast(%T{shape: shape} = out, %T{shape: shape} = tensor, shape, axes) do
      if axes == Nx.axes(shape),
        do: same_data(out, tensor),
        else: do_broadcast(out, tensor, axes)
    end

    # A broadcast that adds only axes of size 1 (out has tensor's size, its
    # axes strictly increasing: Nx.new_axis, keep_axes gradients) is a
    # reshape of a dense tensor: the same buffer; of a view, a view.
    def broadcast(out, tensor, _shape, axes) do
      if Nx.size(out) == Nx.size(tensor) and strictly_increasing?(axes) and not view?(tensor),
        do: same_data(out, tensor),
        else: do_broadcast(out, tensor, axes)
    end

    defp view?(%T{data: %__MODULE__{strides: strides}}), do: strides != nil
    defp view?(_tensor), do: false

    defp strictly_increasing?([a | [b | _] = rest]), do: a < b and strictly_increasing?(rest)
    defp strictly_increasing?(_), do: true

    defp do_broadcast(%T{shape: out_shape} = out, %T{shape: in_shape} = tensor, axes) do
      in_dims = Tuple.to_list(in_shape)

      strides =
        [in_dims, layout_strides(tensor), axes]
        |> Enum.zip()
        |> Enum.reduce(List.duplicate(0, tuple_size(out_shape)), fn {dim, stride, axis}, acc ->
          if dim == elem(out_shape, axis) and dim != 1,
            do: List.replace_at(acc, axis, stride),
            else: acc
        end)

      if viewable?(tensor, out),
        do: view(out, tensor, strides),
        else: strided_copy(:broadcast, out, tensor, 0, strides, [out, tensor, out_shape, axes])
    end

    impl_if_callback(:transpose, 3)

    def transpose(out, %T{} = tensor, axes) do
      index = device_of(tensor)

      cond do
        axes == Nx.axes(tensor) ->
          same_data(out, tensor)

        known_value(tensor) != nil or Nx.size(tensor) == 0 ->
          strided_copy(:transpose, out, tensor, 0, [], [out, tensor, axes])

        compute_type?(index, nif_type!(tensor.type, :transpose, index)) and rank_ok?(tensor) ->
          transposed(out, tensor, axes, index)

        true ->
          host(:transpose, [out, tensor, axes], no_kernel(:transpose, tensor.type, index))
      end
    end

    # A device tensor's transpose is a view of its buffer (no device op);
    # a tensor of another device or backend is transposed into a new one.
    # A dense matrix's (a weight gradient's) strides are written down
    # directly: [1, columns].
    defp transposed(
           out,
           %T{shape: {_, d1}, vectorized_axes: [], data: %__MODULE__{ref: ref, strides: nil}} =
             tensor,
           [1, 0],
           _index
         )
         when ref != nil,
         do: view(out, tensor, [1, d1])

    defp transposed(out, %T{data: %__MODULE__{device: index, ref: ref}} = tensor, axes, index)
         when ref != nil do
      strides = layout_strides(tensor)
      view(out, tensor, Enum.map(axes, &Enum.at(strides, &1)))
    end

    defp transposed(out, tensor, axes, index) do
      ref = device_ref!(tensor, index)
      wrap(out, alloc(index, fn -> NIF.transpose(dims(tensor), ref, axes) end), index)
    end

    impl_if_callback(:slice, 5)

    def slice(out, %T{shape: shape} = tensor, start_indices, lengths, strides) do
      starts =
        [Tuple.to_list(shape), start_indices, lengths]
        |> Enum.zip_with(fn [dim, start, len] ->
          start = if is_integer(start), do: start, else: Nx.to_number(start)
          min(max(start, 0), dim - len)
        end)

      if out.shape == shape and Enum.all?(strides, &(&1 == 1)) do
        same_data(out, tensor)
      else
        in_strides = layout_strides(tensor)
        offset = Enum.zip_with(starts, in_strides, &*/2) |> Enum.sum()
        view_strides = Enum.zip_with(strides, in_strides, &*/2)
        args = [out, tensor, starts, lengths, strides]
        strided_copy(:slice, out, tensor, offset, view_strides, args)
      end
    end

    impl_if_callback(:reverse, 3)

    def reverse(out, %T{shape: shape} = tensor, axes) do
      dims = Tuple.to_list(shape)

      {strides, offset} =
        dims
        |> Enum.zip(layout_strides(tensor))
        |> Enum.with_index()
        |> Enum.map_reduce(0, fn {{dim, stride}, axis}, offset ->
          if axis in axes, do: {-stride, offset + (dim - 1) * stride}, else: {stride, offset}
        end)

      strided_copy(:reverse, out, tensor, offset, strides, [out, tensor, axes])
    end

    impl_if_callback(:pad, 4)

    def pad(out, %T{} = tensor, pad_value, config) do
      if Enum.all?(config, fn {lo, hi, interior} -> lo <= 0 and hi <= 0 and interior == 0 end) do
        # Only negative padding: a slice.
        in_strides = layout_strides(tensor)
        offset = Enum.zip_with(config, in_strides, fn {lo, _, _}, s -> -lo * s end) |> Enum.sum()
        args = [out, tensor, pad_value, config]
        strided_copy(:pad, out, tensor, offset, in_strides, args)
      else
        assemble(:pad, out, [tensor, pad_value], [out, tensor, pad_value, config], fn
          nif_type, index ->
            # pad_value broadcast over the output, then the tensor's visible
            # elements written at their padded positions.
            with {:ok, v} <- read_operand(pad_value, nif_type, index),
                 {:ok, src} <- operand(tensor, nif_type, index) do
              zeros = List.duplicate(0, tuple_size(out.shape))
              base = alloc(index, fn -> NIF.unary(:copy, dims(out), v, 0, zeros) end)
              out_strides = dense_strides(dims(out))
              in_strides = dense_strides(dims(tensor))
              axes = Enum.zip([config, dims(tensor), dims(out), in_strides, out_strides])
              region = Enum.map(axes, &pad_region/1)

              unless Enum.any?(region, &(&1 == :empty)) do
                {counts, src_offs, dst_offs, dst_strides} = unzip4(region)

                NIF.copy_into(
                  base,
                  Enum.sum(dst_offs),
                  dst_strides,
                  counts,
                  src,
                  Enum.sum(src_offs),
                  in_strides
                )
              end

              {:ok, base}
            end
        end)
      end
    end

    # Where the elements of one axis of a padded tensor land: input index j
    # goes to output position lo + j * (interior + 1) when that is inside.
    defp pad_region({{lo, _hi, interior}, in_dim, out_dim, in_stride, out_stride}) do
      step = interior + 1
      j_min = if lo >= 0, do: 0, else: div(-lo + step - 1, step)
      j_max = min(in_dim - 1, Integer.floor_div(out_dim - 1 - lo, step))

      if j_max < j_min do
        :empty
      else
        {j_max - j_min + 1, j_min * in_stride, (lo + j_min * step) * out_stride,
         out_stride * step}
      end
    end

    defp unzip4(list) do
      {Enum.map(list, &elem(&1, 0)), Enum.map(list, &elem(&1, 1)), Enum.map(list, &elem(&1, 2)),
       Enum.map(list, &elem(&1, 3))}
    end

    impl_if_callback(:concatenate, 3)

    def concatenate(%T{} = out, tensors, axis) do
      assemble(:concatenate, out, tensors, [out, tensors, axis], fn nif_type, index ->
        base = alloc(index, fn -> NIF.empty(Nx.Vulkan.device(index), nif_type, Nx.size(out)) end)
        out_strides = dense_strides(dims(out))
        axis_stride = Enum.at(out_strides, axis)

        Enum.reduce_while(tensors, {:ok, 0}, fn t, {:ok, at} ->
          case operand(t, nif_type, index) do
            {:ok, src} ->
              if Nx.size(t) > 0,
                do: NIF.copy_into(base, at * axis_stride, out_strides, dims(t), src, 0, nil)

              {:cont, {:ok, at + elem(t.shape, axis)}}

            :error ->
              {:halt, :error}
          end
        end)
        |> case do
          {:ok, _} -> {:ok, base}
          :error -> :error
        end
      end)
    end

    impl_if_callback(:put_slice, 4)

    def put_slice(%T{} = out, tensor, start_indices, slice) do
      args = [out, tensor, start_indices, slice]

      assemble(
        :put_slice,
        out,
        [tensor, slice | Enum.filter(start_indices, &is_struct/1)],
        args,
        fn
          nif_type, index ->
            with {:ok, t} <- operand(tensor, nif_type, index),
                 {:ok, src} <- operand(slice, nif_type, index) do
              base = alloc(index, fn -> NIF.copy(t) end)
              out_strides = dense_strides(dims(out))

              # Nx clamps the start so the slice fits.
              offset =
                [start_indices, dims(out), dims(slice), out_strides]
                |> Enum.zip()
                |> Enum.map(fn {start, dim, len, stride} ->
                  start = if is_integer(start), do: start, else: Nx.to_number(start)
                  min(max(start, 0), dim - len) * stride
                end)
                |> Enum.sum()

              if Nx.size(slice) > 0,
                do: NIF.copy_into(base, offset, out_strides, dims(slice), src, 0, nil)

              {:ok, base}
            end
        end
      )
    end

    # Builds out on the device with build.(nif_type, index) -> {:ok, ref} |
    # :error (writing regions of a fresh tensor), or computes it on the host.
    defp assemble(op, %T{type: type} = out, inputs, args, build) do
      index = device_of_args(inputs)

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- convert_type?(index, nif_type) and rank_ok?(out),
           {:ok, ref} <- build.(nif_type, index) do
        wrap(out, ref, index)
      else
        _ -> host(op, args, no_kernel(op, type, index))
      end
    end

    # The bytes of the one element out takes from a host tensor at offset
    # (a defn's literal, such as the rotation amounts that Nx.Random's
    # rounds index with their counter): read on the host, out becomes a
    # constant without a buffer where the tensor would have been uploaded
    # whole and copied from. nil for any other out or tensor.
    defp host_element(
           %T{type: {_, bits}} = out,
           %T{data: %Nx.BinaryBackend{state: state}},
           offset
         )
         when bits <= 64 and is_binary(state) and is_integer(offset) and offset >= 0 and
                (offset + 1) * bits <= bit_size(state) do
      if Nx.size(out) == 1, do: binary_part(state, div(offset * bits, 8), div(bits, 8))
    end

    defp host_element(_out, _tensor, _offset), do: nil

    # A strided read of `tensor` into a new dense tensor of out's shape:
    # element i of the output is tensor[offset + sum(i_k * strides_k)].
    defp strided_copy(op, %T{type: type} = out, %T{type: type} = tensor, offset, strides, args) do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)

      cond do
        (value = known_value(tensor)) != nil ->
          bytes = scalar_bytes(type, value)

          constant_view(out, index, nif_type, bytes) ||
            wrap(out, fill(index, nif_type, Nx.size(out), bytes), index, value)

        (bytes = host_element(out, tensor, offset)) != nil ->
          constant_of(out, index, bytes)

        Nx.size(out) == 0 ->
          empty(out, index)

        copy_type?(index, nif_type) and rank_ok?(out) ->
          wrap(
            out,
            strided_read(index, dims(out), buffer_ref!(tensor, index), offset, strides),
            index
          )

        true ->
          host(op, args, no_kernel(op, type, index))
      end
    end

    defp strided_copy(op, out, tensor, _offset, _strides, args) do
      host(op, args, "input is #{type_name(tensor.type)}, output #{type_name(out.type)}")
    end

    ## Element-wise binary ops

    # A tensor of known value that binary ops and comparisons take as an
    # immediate operand: a scalar, or a constant of any shape
    # (constant_view/4, its strides all 0).
    defguardp immediate_like(shape, value, strides)
              when value != nil and
                     (shape == {} or (is_list(strides) and strides != [] and hd(strides) == 0))

    native_binary =
      [:add, :subtract, :multiply, :pow, :remainder, :divide, :atan2, :min, :max, :quotient] ++
        [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift]

    for op <- native_binary do
      impl_if_callback(op, 3)
      def unquote(op)(out, left, right), do: element_wise_binary(unquote(op), out, left, right)
    end

    # Two integer constants without a buffer (a `while` loop's counter
    # and its step under Nx.Defn.Evaluator): the result computed on the
    # host as the kernel computes it, a constant without a buffer
    # (host_binary/4), so no device op and no round trip when the loop
    # reads its condition back.
    defp element_wise_binary(
           op,
           %T{type: {kind, _} = type} = out,
           %T{type: {lk, _}, data: %__MODULE__{device: index, ref: nil, value: a}} = left,
           %T{type: {rk, _}, data: %__MODULE__{device: index, ref: nil, value: b}} = right
         )
         when kind in [:s, :u] and lk in [:s, :u] and rk in [:s, :u] and is_integer(a) and
                is_integer(b) do
      case host_binary(op, type, wrap_int(a, type), wrap_int(b, type)) do
        nil -> element_wise_binary_scalar(op, out, left, right)
        value -> %{out | data: %__MODULE__{ref: nil, device: index, value: value}}
      end
    end

    # The commonest number first: dense x of out's type (f32, f64, s32 or
    # s64) and a real number c that Nx made a constant without a buffer
    # (Nx.add(x, 1), Nx.multiply(g, 0.1)), on either side: c's value in
    # out's type is the kernel's immediate, with none of the general path's
    # operand planning (element_wise_binary_scalar/4 does the same for any
    # type and constant).
    defp element_wise_binary(
           op,
           %T{type: type, shape: shape} = out,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}} =
             x,
           %T{shape: {}, data: %__MODULE__{device: index, ref: nil, value: value}} = c
         )
         when is_number(value) and is_reference(a) and tuple_size(shape) <= @max_rank and
                type in [{:f, 32}, {:f, 64}, {:s, 32}, {:s, 64}] do
      immediate_number(op, out, x, c, false)
    end

    defp element_wise_binary(
           op,
           %T{type: type, shape: shape} = out,
           %T{shape: {}, data: %__MODULE__{device: index, ref: nil, value: value}} = c,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: b, strides: nil}} =
             x
         )
         when is_number(value) and is_reference(b) and tuple_size(shape) <= @max_rank and
                type in [{:f, 32}, {:f, 64}, {:s, 32}, {:s, 64}] do
      immediate_number(op, out, x, c, true)
    end

    # Then both operands dense on one device, of out's type and shape (x +
    # y on equal tensors): straight to the NIF call, with no operand
    # planning (dense_pair/3).
    defp element_wise_binary(
           op,
           %T{type: type, shape: shape} = out,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}} =
             left,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: b, strides: nil}} =
             right
         )
         when is_reference(a) and is_reference(b) and tuple_size(shape) <= @max_rank,
         do: binary_dense(op, out, left, right, nil, nil)

    # Then both operands dense on one device, of out's type (dense_pair/3:
    # a bias added to each row): no operand to convert, so the NIF call is
    # all there is.
    defp element_wise_binary(op, %T{type: type} = out, %T{type: type} = left, right) do
      case dense_pair(out, left, right) do
        {:ok, as, bs} -> binary_dense(op, out, left, right, as, bs)
        :error -> element_wise_binary_scalar(op, out, left, right)
      end
    end

    defp element_wise_binary(op, out, left, right),
      do: element_wise_binary_scalar(op, out, left, right)

    # x op c or c op x, c a number that Nx made a device scalar
    # (Nx.add(x, 1), Nx.multiply(0.1, g)) or a constant of any shape
    # (constant_view/4): the value in out's type as an immediate operand
    # (immediate_op/6).
    defp element_wise_binary_scalar(
           op,
           %T{type: type, shape: shape} = out,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}} =
             left,
           %T{shape: c_shape, data: %__MODULE__{device: index, value: value, strides: cs}} = right
         )
         when immediate_like(c_shape, value, cs) and tuple_size(shape) <= @max_rank and
                is_reference(a),
         do: binary_immediate(op, out, left, right, false)

    defp element_wise_binary_scalar(
           op,
           %T{type: type, shape: shape} = out,
           %T{shape: c_shape, data: %__MODULE__{device: index, value: value, strides: cs}} = left,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: b, strides: nil}} =
             right
         )
         when immediate_like(c_shape, value, cs) and tuple_size(shape) <= @max_rank and
                is_reference(b),
         do: binary_immediate(op, out, right, left, true)

    defp element_wise_binary_scalar(op, out, left, right),
      do: element_wise_binary_any(op, out, left, right)

    # element_wise_binary/4's number fast path: x op c (c op x when
    # c_first), c's value converted to out's type (convert_value/3) as the
    # kernel's immediate. A device without the kernel takes the general
    # path (element_wise_binary_scalar/4).
    defp immediate_number(op, %T{type: type} = out, %T{data: xd} = x, c, c_first) do
      index = xd.device

      if binary_kernel?(index, op, type) do
        {a, dims, bytes} = {xd.ref, dims(out), convert_value(c.data.value, c.type, type)}

        ref =
          if c_first,
            do: alloc(index, fn -> NIF.binary(op, dims, bytes, 0, nil, a, 0, nil) end),
            else: alloc(index, fn -> NIF.binary(op, dims, a, 0, nil, bytes, 0, nil) end)

        wrap(out, ref, index)
      else
        if c_first,
          do: element_wise_binary_scalar(op, out, c, x),
          else: element_wise_binary_scalar(op, out, x, c)
      end
    end

    # {:ok, as, bs}: the strides reading left and right in place for out,
    # when both are dense on one device, of one type, and of out's shape
    # (nil, nil) or broadcast to it (stride 0 along the axes they
    # broadcast); :error otherwise.
    defp dense_pair(
           %T{shape: shape},
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}},
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: b, strides: nil}}
         )
         when tuple_size(shape) <= @max_rank and is_reference(a) and is_reference(b),
         do: {:ok, nil, nil}

    defp dense_pair(
           %T{shape: shape, vectorized_axes: []},
           %T{type: type, vectorized_axes: [], data: %__MODULE__{device: index} = ld} = left,
           %T{type: type, vectorized_axes: [], data: %__MODULE__{device: index} = rd} = right
         )
         when tuple_size(shape) <= @max_rank and is_reference(ld.ref) and ld.strides == nil and
                is_reference(rd.ref) and rd.strides == nil,
         do: {:ok, broadcast_strides(left.shape, shape), broadcast_strides(right.shape, shape)}

    defp dense_pair(_out, _left, _right), do: :error

    # element_wise_binary/4 of dense x and a number c, c first when c_first.
    defp binary_immediate(op, %T{type: type} = out, %T{data: data} = x, c, c_first) do
      index = data.device
      nif_type = nif_type!(type, op, index)
      kernel = fn dims, a, as, b, bs -> NIF.binary(op, dims, a, 0, as, b, 0, bs) end

      with true <- supported?(index, :binary, op, nif_type),
           {:ok, result} <- immediate_op(out, x, c, c_first, nif_type, kernel) do
        result
      else
        _ ->
          if c_first,
            do: element_wise_binary_any(op, out, c, x),
            else: element_wise_binary_any(op, out, x, c)
      end
    end

    # {:ok, out} computed by kernel (a two-operand NIF call: dims, then each
    # operand's ref and strides) on dense x and the number c, c first when
    # c_first: c's value in nif_type as an immediate (kernel_operand/3),
    # which the kernel takes from its push constants, or for a value of
    # more than 8 bytes or an uploaded one-element tensor a one-element
    # buffer read with stride 0 along every axis. :error when c cannot be
    # read on the device.
    defp immediate_op(out, %T{data: data}, c, c_first, nif_type, kernel) do
      index = data.device

      with {:ok, imm} <- immediate_operand(c, nif_type, index) do
        dims = dims(out)
        is = if dims == [] or is_binary(imm), do: nil, else: List.duplicate(0, length(dims))
        a = data.ref

        ref =
          if c_first,
            do: alloc(index, fn -> kernel.(dims, imm, is, a, nil) end),
            else: alloc(index, fn -> kernel.(dims, a, nil, imm, is) end)

        {:ok, wrap(out, ref, index)}
      end
    end

    # kernel_operand/3 of immediate_op/6's number, which may also be a
    # constant of more elements (constant_view/4): its value, as for a
    # constant without a buffer (the kernel broadcasts it).
    defp immediate_operand(
           %T{type: type, data: %__MODULE__{ref: ref, value: value, strides: [_ | _]}},
           nif_type,
           index
         )
         when value != nil do
      # Raises on a deallocated tensor, like every other use.
      _ = NIF.tensor_info(ref)
      value_operand(value, type, nif_type, index)
    end

    defp immediate_operand(c, nif_type, index), do: kernel_operand(c, nif_type, index)

    # value (of type) converted to nif_type as an immediate operand, or
    # (c128) a one-element buffer of it.
    defp value_operand(value, type, nif_type, index) do
      bytes = convert_value(value, type, nif_type_to_nx(nif_type))

      if byte_size(bytes) <= 8,
        do: {:ok, bytes},
        else: {:ok, fill(index, nif_type, 1, bytes)}
    end

    # The NIF call of element_wise_binary/4's dense paths: left and right
    # dense on one device, of out's type, read with strides as and bs (nil:
    # dense in out's shape), after one cached lookup for the kernel
    # (binary_kernel?/3). A type the device cannot store raises; a device
    # without the kernel computes on the host.
    defp binary_dense(op, %T{type: type} = out, %T{data: ld} = left, %T{data: rd} = right, as, bs) do
      index = ld.device

      if binary_kernel?(index, op, type) do
        {a, b, dims} = {ld.ref, rd.ref, dims(out)}
        wrap(out, alloc(index, fn -> NIF.binary(op, dims, a, 0, as, b, 0, bs) end), index)
      else
        _ = nif_type!(type, op, index)
        host(op, [out, left, right], no_kernel(op, type, index))
      end
    end

    defp element_wise_binary_any(op, %T{type: type} = out, left, right) do
      index = device_of_args([left, right])
      nif_type = nif_type!(type, op, index)

      kernel = fn shape, a, as, b, bs -> NIF.binary(op, shape, a, 0, as, b, 0, bs) end

      with true <- supported?(index, :binary, op, nif_type) and rank_ok?(out),
           {:ok, result} <-
             mixed_pair(out, left, right, nif_type, index, kernel) ||
               broadcast_pair(out, left, right, nif_type, index, kernel) do
        result
      else
        _ -> host(op, [out, left, right], no_kernel(op, type, index))
      end
    end

    # element_wise_binary_any/4 when one operand is a tensor on the device
    # whose type the binary kernels of out's float type read directly,
    # converting each element as as_type would (an integer type, or a float
    # type narrower than out's: `mixed_type?/2`): that operand is read in
    # place, dense or a view, and the other converted to out's type as
    # broadcast_pair/6 would (a number becomes the cached one-element buffer
    # of its value, as these kernels take no immediates). One device op
    # instead of a conversion and the op. nil when neither operand is such
    # a tensor, or out has no elements.
    defp mixed_pair(%T{type: type} = out, left, right, nif_type, index, kernel) do
      {lm, rm} =
        {mixed_operand(type, left, index, out.shape),
         mixed_operand(type, right, index, out.shape)}

      cond do
        Nx.size(out) == 0 ->
          nil

        lm != nil ->
          with {:ok, b, bs} <- mixed_other(right, nif_type, index, out.shape) do
            {a, as} = lm
            {:ok, wrap(out, alloc(index, fn -> kernel.(dims(out), a, as, b, bs) end), index)}
          end

        rm != nil ->
          with {:ok, a, as} <- mixed_other(left, nif_type, index, out.shape) do
            {b, bs} = rm
            {:ok, wrap(out, alloc(index, fn -> kernel.(dims(out), a, as, b, bs) end), index)}
          end

        true ->
          nil
      end
    end

    # {ref, strides} reading t broadcast to out_shape in place, when t is
    # a tensor on device index, of a type mixed_type?(type, t.type), with
    # no known value (those take the immediate paths); else nil.
    defp mixed_operand(
           type,
           %T{type: t_type, data: %__MODULE__{device: index, ref: ref, value: nil} = data} = t,
           index,
           out_shape
         )
         when t_type != type and is_reference(ref) do
      if mixed_type?(type, t_type) do
        strides =
          case data.strides do
            nil -> broadcast_strides(t.shape, out_shape)
            strides -> broadcast_strides(t.shape, out_shape, strides)
          end

        {ref, strides}
      end
    end

    defp mixed_operand(_type, _t, _index, _out_shape), do: nil

    # mixed_pair/6's other operand, in out's type: {:ok, ref, strides}.
    defp mixed_other(t, nif_type, index, out_shape) do
      with {:ok, x, xs} <- strided_operand(&kernel_operand/3, t, nif_type, index, out_shape) do
        if is_binary(x),
          do: {:ok, shared_scalar(index, nif_type, x), xs},
          else: {:ok, x, xs}
      end
    end

    # The binary kernels of type t read operands of type u directly (the
    # runtime's mixed modules, include/nxv.h): for a float t every integer
    # type and the float types narrower than t; for an integer t the
    # integer types all of whose values it holds (narrower, and unsigned
    # where t is unsigned).
    defp mixed_type?(t, {k, _})
         when t in [{:f, 16}, {:bf, 16}, {:f, 32}, {:f, 64}] and k in [:s, :u],
         do: true

    defp mixed_type?({tk, tb}, {uk, ub})
         when tk in [:s, :u] and uk in [:s, :u] and ub < tb and (uk == :u or tk == :s),
         do: true

    defp mixed_type?({:f, 32}, u) when u in [{:f, 16}, {:bf, 16}], do: true
    defp mixed_type?({:f, 64}, u) when u in [{:f, 16}, {:bf, 16}, {:f, 32}], do: true
    defp mixed_type?(_t, _u), do: false

    # Runs a two-operand kernel on left and right, converted to nif_type and
    # broadcast to out's shape: {:ok, out tensor}, or :error when an operand
    # cannot be converted on the device.
    # Either operand may be an immediate (a binary: kernel_operand/3), which
    # the kernel broadcasts itself (strides nil); at most one is.
    defp broadcast_pair(out, left, right, nif_type, index, kernel) do
      with {:ok, a, as} <- strided_operand(&kernel_operand/3, left, nif_type, index, out.shape),
           {:ok, b, bs} <- strided_operand(&kernel_operand/3, right, nif_type, index, out.shape) do
        a = if is_binary(a) and is_binary(b), do: shared_scalar(index, nif_type, a), else: a

        if Nx.size(out) == 0 do
          {:ok, empty(out, index)}
        else
          as = if is_binary(a), do: nil, else: as
          bs = if is_binary(b), do: nil, else: bs
          {:ok, wrap(out, alloc(index, fn -> kernel.(dims(out), a, as, b, bs) end), index)}
        end
      end
    end

    ## Integer arithmetic and comparisons of known one-element values

    # op on a and b, already wrapped into the integer type, as
    # binary.comp computes it in that type (two's complement, wrapping),
    # or nil for the ops and operands left to the device: the quotient
    # and remainder by zero (the kernel's own convention), shifts and pow.
    defp host_binary(:add, type, a, b), do: wrap_int(a + b, type)
    defp host_binary(:subtract, type, a, b), do: wrap_int(a - b, type)
    defp host_binary(:multiply, type, a, b), do: wrap_int(a * b, type)
    defp host_binary(:min, _type, a, b), do: min(a, b)
    defp host_binary(:max, _type, a, b), do: max(a, b)
    defp host_binary(:bitwise_and, type, a, b), do: wrap_int(Bitwise.band(a, b), type)
    defp host_binary(:bitwise_or, type, a, b), do: wrap_int(Bitwise.bor(a, b), type)
    defp host_binary(:bitwise_xor, type, a, b), do: wrap_int(Bitwise.bxor(a, b), type)
    defp host_binary(:quotient, type, a, b) when b != 0, do: wrap_int(div(a, b), type)
    defp host_binary(:remainder, type, a, b) when b != 0, do: wrap_int(rem(a, b), type)
    defp host_binary(_op, _type, _a, _b), do: nil

    # The integer v as the integer type stores it (as_type's wrapping).
    defp wrap_int(v, {:s, bits}) do
      <<w::signed-size(bits)>> = <<v::size(bits)>>
      w
    end

    defp wrap_int(v, {:u, bits}) do
      <<w::unsigned-size(bits)>> = <<v::size(bits)>>
      w
    end

    # The value v of type from as the kernel reads it in type to, when
    # converting it loses nothing and needs no rounding: integers into an
    # integer type (wrapped, as as_type does), floats into a float type
    # that holds them exactly, integers of at most 24 bits into f32 or
    # f64. nil otherwise (the device converts it).
    defp exact_value(v, {fk, _}, {tk, _} = to) when fk in [:s, :u] and tk in [:s, :u],
      do: wrap_int(v, to)

    defp exact_value(v, {fk, _}, {:f, bits}) when fk in [:s, :u] and bits in [32, 64] do
      if abs(v) <= 16_777_216, do: v * 1.0
    end

    defp exact_value(v, {fk, _}, {:f, 64}) when fk in [:f, :bf] and is_float(v), do: v

    defp exact_value(v, {fk, _}, {:f, 32}) when fk in [:f, :bf] and is_float(v) do
      if abs(v) <= @f32_max do
        <<y::float-32>> = <<v::float-32>>
        if y == v, do: v
      end
    end

    defp exact_value(_v, _from, _to), do: nil

    # compare.comp's result (1 or 0) for two values of one type.
    defp host_compare(:equal, x, y), do: bool_u8(x == y)
    defp host_compare(:not_equal, x, y), do: bool_u8(x != y)
    defp host_compare(:less, x, y), do: bool_u8(x < y)
    defp host_compare(:less_equal, x, y), do: bool_u8(x <= y)
    defp host_compare(:greater, x, y), do: bool_u8(x > y)
    defp host_compare(:greater_equal, x, y), do: bool_u8(x >= y)
    defp host_compare(:logical_and, x, y), do: bool_u8(x != 0 and y != 0)
    defp host_compare(:logical_or, x, y), do: bool_u8(x != 0 or y != 0)
    defp host_compare(:logical_xor, x, y), do: bool_u8(x != 0 != (y != 0))

    defp bool_u8(true), do: 1
    defp bool_u8(false), do: 0

    ## Comparisons and logical ops (u8 results) and select

    native_compare =
      [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal] ++
        [:logical_and, :logical_or, :logical_xor]

    for op <- native_compare do
      impl_if_callback(op, 3)
      def unquote(op)(out, left, right), do: compare(unquote(op), out, left, right)
    end

    # Two constants without a buffer (a `while` loop's condition on its
    # counter under Nx.Defn.Evaluator): compared on the host in the type
    # the kernel would compare them in (compare_type/3), the result a
    # constant without a buffer that Nx.to_number/1 reads with no round
    # trip (host_compare/4). Values that would need a rounding conversion
    # go to the device as before.
    defp compare(
           op,
           %T{type: {:u, 8}} = out,
           %T{data: %__MODULE__{device: index, ref: nil, value: a}} = left,
           %T{data: %__MODULE__{device: index, ref: nil, value: b}} = right
         )
         when is_number(a) and is_number(b) do
      type = compare_type(left, right, index)

      with x when x != nil <- exact_value(a, left.type, type),
           y when y != nil <- exact_value(b, right.type, type) do
        %{out | data: %__MODULE__{ref: nil, device: index, value: host_compare(op, x, y)}}
      else
        _ -> compare_known(op, out, left, right)
      end
    end

    defp compare(op, out, left, right), do: compare_known(op, out, left, right)

    # As for binary ops, the common cases first: two dense operands of one
    # type on one device (dense_pair/3; their merged type is theirs), or
    # one of them beside a number of its type (x == 0.0 in max's gradient),
    # which goes to the kernel as an immediate operand (kernel_operand/3)
    # on either side.
    defp compare_known(op, %T{type: {:u, 8}} = out, left, right) do
      case dense_pair(out, left, right) do
        {:ok, as, bs} -> compare_dense(op, out, left, right, as, bs)
        :error -> compare_scalar(op, out, left, right)
      end
    end

    defp compare_known(op, out, left, right), do: compare_any(op, out, left, right)

    defp compare_scalar(
           op,
           %T{type: {:u, 8}, shape: shape} = out,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}} =
             left,
           %T{
             type: type,
             shape: c_shape,
             data: %__MODULE__{device: index, value: value, strides: cs}
           } = right
         )
         when immediate_like(c_shape, value, cs) and tuple_size(shape) <= @max_rank and
                is_reference(a),
         do: compare_immediate(op, out, left, right, false)

    defp compare_scalar(
           op,
           %T{type: {:u, 8}, shape: shape} = out,
           %T{
             type: type,
             shape: c_shape,
             data: %__MODULE__{device: index, value: value, strides: cs}
           } = left,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: b, strides: nil}} =
             right
         )
         when immediate_like(c_shape, value, cs) and tuple_size(shape) <= @max_rank and
                is_reference(b),
         do: compare_immediate(op, out, right, left, true)

    defp compare_scalar(op, out, left, right), do: compare_any(op, out, left, right)

    # The NIF call of compare/4's dense paths: left and right dense on one
    # device, of one type, read with strides as and bs.
    defp compare_dense(op, out, %T{type: type, data: ld} = left, %T{data: rd} = right, as, bs) do
      index = ld.device

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :compare, op, nif_type) do
        {a, b, dims} = {ld.ref, rd.ref, dims(out)}
        wrap(out, alloc(index, fn -> NIF.compare(op, dims, a, 0, as, b, 0, bs) end), index)
      else
        _ -> compare_any(op, out, left, right)
      end
    end

    # compare/4 of dense x and a number c of x's type, c on the left when
    # c_first.
    defp compare_immediate(op, out, %T{type: type, data: data} = x, c, c_first) do
      index = data.device
      kernel = fn dims, a, as, b, bs -> NIF.compare(op, dims, a, 0, as, b, 0, bs) end

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :compare, op, nif_type),
           {:ok, result} <- immediate_op(out, x, c, c_first, nif_type, kernel) do
        result
      else
        _ -> if c_first, do: compare_any(op, out, c, x), else: compare_any(op, out, x, c)
      end
    end

    # Computed in the merged type of the inputs, as Nx.BinaryBackend does,
    # or in the other operand's type when one side is a constant exactly
    # representable there (x > 0 on u8 or f32 compares in that type: the
    # same result, without widening to s64).
    defp compare_any(op, %T{type: {:u, 8}} = out, %T{} = left, %T{} = right) do
      index = device_of_args([left, right])
      type = compare_type(left, right, index)

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :compare, op, nif_type) and rank_ok?(out),
           {:ok, result} <-
             broadcast_pair(out, left, right, nif_type, index, fn shape, a, as, b, bs ->
               NIF.compare(op, shape, a, 0, as, b, 0, bs)
             end) do
        result
      else
        _ -> host(op, [out, left, right], no_kernel(op, type, index))
      end
    end

    defp compare_any(op, out, left, right),
      do: host(op, [out, left, right], no_kernel(op, out.type, device_of_args([left, right])))

    defp compare_type(left, right, index) do
      merged = Nx.Type.merge(left.type, right.type)

      cond do
        native_mask_type?(merged, index) -> merged
        exact_in?(known_value(right), left.type, index) -> left.type
        exact_in?(known_value(left), right.type, index) -> right.type
        true -> merged
      end
    end

    defp native_mask_type?(type, index) do
      case Map.fetch(@nif_types, type) do
        {:ok, nif_type} -> supported?(index, :select, :select, nif_type)
        :error -> false
      end
    end

    # value is exactly representable in type, which the device compares in.
    defp exact_in?(nil, _type, _index), do: false

    defp exact_in?(value, {kind, bits} = type, index) when is_integer(value) do
      native_mask_type?(type, index) and
        case kind do
          :u -> value >= 0 and value < Bitwise.bsl(1, bits)
          :s -> value >= -Bitwise.bsl(1, bits - 1) and value < Bitwise.bsl(1, bits - 1)
          :f -> abs(value) <= Bitwise.bsl(1, if(bits == 32, do: 24, else: 53))
          _ -> false
        end
    end

    defp exact_in?(value, {:f, 64} = type, index) when is_float(value),
      do: native_mask_type?(type, index)

    defp exact_in?(value, {:f, 32} = type, index) when is_float(value) do
      native_mask_type?(type, index) and
        match?(<<^value::float-32-native>>, <<value::float-32-native>>)
    end

    defp exact_in?(_value, _type, _index), do: false

    # is_nan: x != x; is_infinity: |x| == inf (complex: a NaN component; an
    # infinite component). Integer inputs are never either, but Nx computes
    # them the same way.
    impl_if_callback(:is_nan, 2)
    def is_nan(out, tensor), do: float_class(:is_nan, out, tensor)

    impl_if_callback(:is_infinity, 2)
    def is_infinity(out, tensor), do: float_class(:is_infinity, out, tensor)

    defp float_class(_op, %T{type: {:u, 8}} = out, %T{type: {kind, _}} = tensor)
         when kind in [:s, :u] do
      index = device_of(tensor)

      if Nx.size(out) == 0,
        do: empty(out, index),
        else: wrap(out, fill(index, :u8, Nx.size(out), <<0>>), index)
    end

    defp float_class(op, %T{type: {:u, 8}} = out, %T{type: {kind, _} = type} = tensor)
         when kind in [:f, :bf, :c] do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)

      with true <- supported?(index, :compare, :equal, nif_type) and rank_ok?(tensor),
           {:ok, t} <- operand(tensor, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          shape = dims(tensor)

          ref =
            case op do
              :is_nan ->
                alloc(index, fn -> NIF.compare(:not_equal, shape, t, 0, nil, t, 0, nil) end)

              :is_infinity ->
                a = alloc(index, fn -> NIF.unary(:abs, shape, t, 0, nil) end)
                abs_type = Nx.Type.to_real(type)
                abs_nif = nif_type!(abs_type, op, index)
                inf = fill(index, abs_nif, 1, scalar_bytes(abs_type, :infinity))
                zeros = List.duplicate(0, length(shape))
                alloc(index, fn -> NIF.compare(:equal, shape, a, 0, nil, inf, 0, zeros) end)
            end

          wrap(out, ref, index)
        end
      else
        _ -> host(op, [out, tensor], no_kernel(op, type, index))
      end
    end

    defp float_class(op, out, tensor),
      do: host(op, [out, tensor], no_kernel(op, tensor.type, device_of(tensor)))

    impl_if_callback(:select, 4)

    # The common case first: a dense u8 predicate of out's shape choosing
    # between dense tensors of out's type and shape and numbers (max's
    # gradient: select(x == y, 1.0, 0.0)), with no layout planning. A
    # number (a device constant or a host scalar) is read through the
    # cached buffer of its value, stride 0.
    def select(
          %T{type: type, shape: shape, vectorized_axes: []} = out,
          %T{type: {:u, 8}, shape: shape, vectorized_axes: [], data: %__MODULE__{} = pd} = pred,
          on_true,
          on_false
        )
        when is_reference(pd.ref) and pd.strides == nil and tuple_size(shape) <= @max_rank do
      index = pd.device

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :select, :select, nif_type),
           {:ok, a, as} <- select_operand(on_true, out, nif_type, index),
           {:ok, b, bs} <- select_operand(on_false, out, nif_type, index) do
        dims = Tuple.to_list(shape)
        p = pd.ref
        wrap(out, alloc(index, fn -> NIF.select(dims, p, 0, nil, a, 0, as, b, 0, bs) end), index)
      else
        _ -> select_any(out, pred, on_true, on_false)
      end
    end

    def select(out, pred, on_true, on_false), do: select_any(out, pred, on_true, on_false)

    # A select/4 operand on the direct path: {:ok, ref, strides}, or :error.
    defp select_operand(
           %T{type: type, shape: shape, vectorized_axes: [], data: %__MODULE__{} = data},
           %T{type: type, shape: shape},
           _nif_type,
           index
         )
         when data.device == index and is_reference(data.ref) and data.strides == nil,
         do: {:ok, data.ref, nil}

    defp select_operand(%T{shape: {}, data: data} = t, out, nif_type, index)
         when (is_struct(data, __MODULE__) and data.device == index and data.value != nil) or
                is_struct(data, Nx.BinaryBackend) do
      with {:ok, ref} <- read_operand(t, nif_type, index),
           do: {:ok, ref, List.duplicate(0, tuple_size(out.shape))}
    end

    defp select_operand(_t, _out, _nif_type, _index), do: :error

    defp select_any(%T{type: type} = out, pred, on_true, on_false) do
      index = device_of_args([pred, on_true, on_false])

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :select, :select, nif_type) and rank_ok?(out),
           {:ok, p} <- predicate(pred, index),
           {:ok, a, a_strides} <-
             strided_operand(&read_operand/3, on_true, nif_type, index, out.shape),
           {:ok, b, b_strides} <-
             strided_operand(&read_operand/3, on_false, nif_type, index, out.shape) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          p_strides = broadcast_strides(pred.shape, out.shape)

          wrap(
            out,
            alloc(index, fn ->
              NIF.select(dims(out), p, 0, p_strides, a, 0, a_strides, b, 0, b_strides)
            end),
            index
          )
        end
      else
        _ -> host(:select, [out, pred, on_true, on_false], no_kernel(:select, type, index))
      end
    end

    # pred as a u8 tensor of its own shape, true where pred is non-zero.
    defp predicate(%T{type: {:u, 8}} = pred, index), do: read_operand(pred, :u8, index)

    defp predicate(%T{type: type} = pred, index) do
      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :compare, :not_equal, nif_type),
           {:ok, p} <- read_operand(pred, nif_type, index) do
        {zero, zeros} =
          case convert_value(0, {:s, 64}, type) do
            bytes when byte_size(bytes) <= 8 -> {bytes, nil}
            bytes -> {fill(index, nif_type, 1, bytes), List.duplicate(0, tuple_size(pred.shape))}
          end

        {:ok,
         alloc(index, fn -> NIF.compare(:not_equal, dims(pred), p, 0, nil, zero, 0, zeros) end)}
      else
        _ -> :error
      end
    end

    ## Element-wise unary ops

    native_unary =
      [:negate, :abs, :sign, :sqrt, :rsqrt, :exp, :log, :sin, :cos, :tanh, :sigmoid] ++
        [:floor, :ceil, :round, :bitwise_not] ++
        [:expm1, :log1p, :erf, :erfc, :erf_inv, :tan, :sinh, :cosh] ++
        [:cbrt, :asin, :acos, :atan, :asinh, :acosh, :atanh] ++
        [:count_leading_zeros, :population_count]

    for op <- native_unary do
      impl_if_callback(op, 2)
      def unquote(op)(out, tensor), do: element_wise_unary(unquote(op), out, tensor)
    end

    # abs of a complex tensor is of its component type.
    defp element_wise_unary(:abs, out, %T{type: {:c, _}} = tensor),
      do: complex_unary(:abs, out, tensor)

    # The common case first: a dense operand of out's type and shape.
    defp element_wise_unary(
           op,
           %T{type: {kind, _} = type, shape: shape} = out,
           %T{type: type, shape: shape, data: %__MODULE__{device: index, ref: a, strides: nil}} =
             tensor
         )
         when is_reference(a) and tuple_size(shape) <= @max_rank and
                (kind not in [:s, :u] or op not in [:floor, :ceil, :round]) do
      nif_type = nif_type!(type, op, index)

      if supported?(index, :unary, op, nif_type) do
        dims = Tuple.to_list(shape)
        wrap(out, alloc(index, fn -> NIF.unary(op, dims, a, 0, nil) end), index)
      else
        host(op, [out, tensor], no_kernel(op, type, index))
      end
    end

    defp element_wise_unary(op, %T{type: type} = out, tensor) do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)

      with false <- op in [:floor, :ceil, :round] and integer_type?(type) and tensor.type == type,
           true <- supported?(index, :unary, op, nif_type) and rank_ok?(out),
           {:ok, a, strides} <- strided_operand(&operand/3, tensor, nif_type, index, out.shape) do
        if Nx.size(out) == 0,
          do: empty(out, index),
          else: wrap(out, alloc(index, fn -> NIF.unary(op, dims(out), a, 0, strides) end), index)
      else
        true -> same_data(out, tensor)
        _ -> host(op, [out, tensor], no_kernel(op, type, index))
      end
    end

    # conjugate, real, imag and phase: the tensor as a complex type (c128
    # for f64, c64 otherwise), then the complex kernel; real, imag, phase
    # and abs produce its component type, converted to out's type where it
    # differs (phase of f16).
    for op <- [:conjugate, :real, :imag, :phase] do
      impl_if_callback(op, 2)
      def unquote(op)(out, tensor), do: complex_unary(unquote(op), out, tensor)
    end

    defp complex_unary(op, %T{type: type} = out, %T{} = tensor) do
      index = device_of(tensor)
      ctype = complex_of(if(match?({:c, _}, tensor.type), do: tensor.type, else: type))
      nif_op = if op == :conjugate, do: :conjugate, else: op
      result_type = if op == :conjugate, do: ctype, else: Nx.Type.to_real(ctype)

      with {:ok, c_nif} <- Map.fetch(@nif_types, ctype),
           {:ok, out_nif} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :unary, nif_op, c_nif) and rank_ok?(out),
           true <- result_type == type or convert_type?(index, out_nif),
           {:ok, a} <- operand(tensor, c_nif, index) do
        cond do
          Nx.size(out) == 0 ->
            empty(out, index)

          result_type == type ->
            wrap(out, alloc(index, fn -> NIF.unary(nif_op, dims(out), a, 0, nil) end), index)

          true ->
            r = alloc(index, fn -> NIF.unary(nif_op, dims(out), a, 0, nil) end)
            wrap(out, alloc(index, fn -> NIF.convert(out_nif, dims(out), r, 0, nil) end), index)
        end
      else
        _ -> host(op, [out, tensor], no_kernel(op, type, index))
      end
    end

    defp complex_of({:c, _} = type), do: type
    defp complex_of({:f, 64}), do: {:c, 128}
    defp complex_of(_), do: {:c, 64}

    ## FFT

    for {op, inverse} <- [fft: false, ifft: true] do
      impl_if_callback(op, 3)

      def unquote(op)(out, tensor, opts),
        do: fft_op(unquote(op), unquote(inverse), out, tensor, opts)
    end

    # The tensor converted to out's complex type, cut or zero-padded to
    # :length along :axis, that axis moved last, the transform of each row
    # (one kernel dispatch per stage), and the axis moved back.
    defp fft_op(op, inverse, %T{type: type, shape: out_shape} = out, %T{} = tensor, opts) do
      index = device_of(tensor)
      axis = opts[:axis]
      n = opts[:length]
      eps = opts[:eps] * 1.0
      rank = tuple_size(out_shape)

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- convert_type?(index, nif_type) and rank_ok?(out) do
        converted = as_type(%{tensor | type: type}, tensor)
        len = elem(tensor.shape, axis)
        sized_shape = put_elem(tensor.shape, axis, n)
        sized = %{converted | shape: sized_shape}

        sized =
          cond do
            len == n ->
              converted

            len > n ->
              starts = List.duplicate(0, rank)
              slice(sized, converted, starts, Tuple.to_list(sized_shape), List.duplicate(1, rank))

            true ->
              zero = Nx.tensor(0, type: type, backend: Nx.BinaryBackend)

              config =
                for i <- 0..(rank - 1), do: if(i == axis, do: {0, n - len, 0}, else: {0, 0, 0})

              pad(sized, converted, zero, config)
          end

        last = rank - 1

        perm =
          Enum.map(0..last, fn i ->
            if i == axis, do: last, else: if(i == last, do: axis, else: i)
          end)

        moved_shape = perm |> Enum.map(&elem(sized_shape, &1)) |> List.to_tuple()
        moved = transpose(%{sized | shape: moved_shape}, sized, perm)
        rows = div(Nx.size(moved_shape), n)

        result =
          if Nx.size(moved_shape) == 0 do
            empty(%{moved | shape: moved_shape}, index)
          else
            ref = device_ref!(moved, index)

            wrap(
              %{moved | shape: moved_shape},
              alloc(index, fn -> NIF.fft(ref, rows, n, inverse, eps) end),
              index
            )
          end

        transpose(out, result, perm)
      else
        _ -> host(op, [out, tensor, opts], no_kernel(op, type, index))
      end
    end

    impl_if_callback(:clip, 4)

    def clip(%T{type: type} = out, tensor, min, max) do
      index = device_of_args([tensor, min, max])
      nif_type = nif_type!(type, :clip, index)

      with true <-
             supported?(index, :binary, :max, nif_type) and
               supported?(index, :binary, :min, nif_type) and rank_ok?(out),
           {:ok, t, t_strides} <- strided_operand(&operand/3, tensor, nif_type, index, out.shape),
           {:ok, lo} <- kernel_operand(min, nif_type, index),
           {:ok, hi} <- kernel_operand(max, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          # Numbers (the usual bounds) are immediates (kernel_operand/3).
          shape = dims(out)
          lo_strides = if is_binary(lo), do: nil, else: broadcast_strides(min.shape, out.shape)

          lower =
            alloc(index, fn -> NIF.binary(:max, shape, t, 0, t_strides, lo, 0, lo_strides) end)

          hi_strides = if is_binary(hi), do: nil, else: broadcast_strides(max.shape, out.shape)

          wrap(
            out,
            alloc(index, fn -> NIF.binary(:min, shape, lower, 0, nil, hi, 0, hi_strides) end),
            index
          )
        end
      else
        _ -> host(:clip, [out, tensor, min, max], no_kernel(:clip, type, index))
      end
    end

    ## Reductions

    for {op, nif_op} <- [sum: :sum, product: :product, reduce_max: :max, reduce_min: :min] do
      impl_if_callback(op, 3)

      def unquote(op)(out, tensor, opts) do
        reduction(unquote(op), unquote(nif_op), out, tensor, opts)
      end
    end

    defp reduction(op, nif_op, %T{type: type} = out, %T{type: in_type} = tensor, opts) do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)

      # Sums and products of 8- to 32-bit integers (into Nx's 64-bit type)
      # read the operand in its own type, widened by the kernel: no
      # converted copy.
      in_nif =
        if nif_op in [:sum, :product] and widening?(in_type, type),
          do: nif_type!(in_type, op, index),
          else: nif_type

      with true <-
             compute_type?(index, nif_type) and compute_type?(index, in_nif) and
               (nif_op in [:sum, :product] or real?(type)) and rank_ok?(tensor),
           {:ok, a, strides} <- strided_operand(&operand/3, tensor, in_nif, index, tensor.shape) do
        axes = opts[:axes] || Nx.axes(tensor)

        wrap(
          out,
          alloc(index, fn ->
            NIF.reduce(nif_op, dims(tensor), a, 0, strides, axes, nif_type)
          end),
          index
        )
      else
        _ -> host(op, [out, tensor, opts], no_kernel(op, type, index))
      end
    end

    # Whether a reduction from integers of type from into type to widens
    # them to the 64-bit type of their sign.
    defp widening?({kind, bits}, {kind, 64}) when kind in [:s, :u] and bits < 64, do: true
    defp widening?(_from, _to), do: false

    # argmax/argmin: an s64 index over the axis (or the flattened tensor),
    # converted to the output type where it differs.
    for op <- [:argmax, :argmin] do
      impl_if_callback(op, 3)

      def unquote(op)(out, tensor, opts),
        do: arg_reduction(unquote(op), out, tensor, opts)
    end

    defp arg_reduction(op, %T{type: type} = out, %T{} = tensor, opts) do
      index = device_of(tensor)
      nif_type = nif_type!(tensor.type, op, index)
      out_nif = nif_type!(type, op, index)

      with true <- real_compute_type?(index, nif_type) and convert_type?(index, out_nif),
           true <- rank_ok?(tensor),
           {:ok, a} <- operand(tensor, nif_type, index) do
        axes = if axis = opts[:axis], do: [axis], else: Nx.axes(tensor)
        high = opts[:tie_break] == :high

        ref = alloc(index, fn -> NIF.argreduce(op, high, dims(tensor), a, 0, nil, axes) end)

        ref =
          if out_nif == :s64,
            do: ref,
            else: alloc(index, fn -> NIF.convert(out_nif, [Nx.size(out)], ref, 0, nil) end)

        wrap(out, ref, index)
      else
        _ -> host(op, [out, tensor, opts], no_kernel(op, tensor.type, index))
      end
    end

    ## Window reductions

    for {op, nif_op} <- [
          window_sum: :sum,
          window_product: :product,
          window_max: :max,
          window_min: :min
        ] do
      impl_if_callback(op, 4)

      def unquote(op)(out, tensor, window, opts),
        do: window_op(unquote(op), unquote(nif_op), out, tensor, window, opts)
    end

    defp window_op(op, nif_op, %T{type: type} = out, tensor, window, opts) do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)
      rank = tuple_size(tensor.shape)
      strides = opts[:strides] || List.duplicate(1, rank)
      dilations = opts[:window_dilations] || List.duplicate(1, rank)
      padding = opts[:padding] || List.duplicate({0, 0}, rank)

      with true <- real_compute_type?(index, nif_type) and rank_ok?(tensor),
           true <- is_list(strides) and is_list(dilations) and is_list(padding),
           {:ok, a} <- operand(tensor, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          ref =
            alloc(index, fn ->
              NIF.window_reduce(
                nif_op,
                a,
                dims(tensor),
                dims(out),
                Tuple.to_list(window),
                strides,
                dilations,
                Enum.map(padding, &elem(&1, 0))
              )
            end)

          wrap(out, ref, index)
        end
      else
        _ -> host(op, [out, tensor, window, opts], no_kernel(op, type, index))
      end
    end

    # reduce and window_reduce whose function is one of add, multiply, max
    # or min of its two arguments (recognized from its expression) run as
    # the native reductions, then combine the accumulator once: for max and
    # min any accumulator; for add and multiply of windows only their
    # identity (padding contributes the accumulator to each window).
    impl_if_callback(:reduce, 5)

    def reduce(%T{} = out, %T{} = tensor, acc, opts, fun) do
      case native_fun(fun, out, tensor) do
        nil ->
          host(:reduce, [out, tensor, acc, opts, fun], "a function without a kernel")

        op ->
          nif_op = %{add: :sum, multiply: :product, max: :max, min: :min}[op]
          reduced = reduction(:reduce, nif_op, out, tensor, axes: opts[:axes] || Nx.axes(tensor))
          apply(__MODULE__, op, [out, reduced, acc])
      end
    end

    impl_if_callback(:window_reduce, 6)

    def window_reduce(%T{} = out, %T{} = tensor, acc, window, opts, fun) do
      op = native_fun(fun, out, tensor)
      identity = %{add: 0, multiply: 1}[op]

      cond do
        op in [:max, :min] ->
          w = window_op(:window_reduce, op, out, tensor, window, opts)
          apply(__MODULE__, op, [out, w, acc])

        op != nil and known_value(acc) == identity ->
          window_op(
            :window_reduce,
            %{add: :sum, multiply: :product}[op],
            out,
            tensor,
            window,
            opts
          )

        true ->
          host(
            :window_reduce,
            [out, tensor, acc, window, opts, fun],
            "a function without a kernel"
          )
      end
    end

    defp native_fun(fun, %T{type: type} = out, tensor) do
      index = device_of(tensor)

      case Map.fetch(@nif_types, type) do
        {:ok, nif_type} ->
          if real_compute_type?(index, nif_type) and rank_ok?(out) and rank_ok?(tensor),
            do: known_fun(fun, type)

        :error ->
          nil
      end
    end

    # Recognizing a function builds its expression (milliseconds): the
    # answer is cached per process by the function (equal code and
    # captured values) and type, up to @fun_cache_limit entries.
    @fun_cache_limit 256

    defp known_fun(fun, type) when is_function(fun, 2) do
      cache = Process.get({__MODULE__, :known_funs}, %{})

      case Map.fetch(cache, {fun, type}) do
        {:ok, op} ->
          op

        :error ->
          op = recognize_fun(fun, type)
          cache = if map_size(cache) >= @fun_cache_limit, do: %{}, else: cache
          Process.put({__MODULE__, :known_funs}, Map.put(cache, {fun, type}, op))
          op
      end
    end

    defp known_fun(_fun, _type), do: nil

    defp recognize_fun(fun, type) do
      p = Nx.template({}, type)

      case Nx.Defn.debug_expr(fun).(p, p) do
        %T{data: %Nx.Defn.Expr{op: op, args: [%T{data: a}, %T{data: b}]}}
        when op in [:add, :multiply, :max, :min] ->
          if param_index(a) != nil and Enum.sort([param_index(a), param_index(b)]) == [0, 1],
            do: op,
            else: nil

        _ ->
          nil
      end
    rescue
      _ -> nil
    end

    defp param_index(%Nx.Defn.Expr{op: :parameter, args: [i]}), do: i
    defp param_index(_), do: nil

    ## Window scatter

    # The gradient of window_max/window_min: each window selects its
    # largest (smallest) element, the last one on ties, among the
    # tensor's own elements (padding is never selected); the source
    # values of the windows add up at the selected elements, over
    # init_value. The tensor is compared in its own type; source and
    # init_value are converted to the output type.
    for {op, nif_op} <- [window_scatter_max: :max, window_scatter_min: :min] do
      impl_if_callback(op, 6)

      def unquote(op)(out, tensor, source, init_value, window, opts) do
        window_scatter(
          unquote(op),
          unquote(nif_op),
          out,
          [tensor, source, init_value],
          window,
          opts
        )
      end
    end

    defp window_scatter(op, nif_op, %T{type: type} = out, args, window, opts) do
      [tensor, source, init_value] = args
      index = device_of_args(args)
      nif_type = nif_type!(type, op, index)
      in_type = nif_type!(tensor.type, op, index)
      rank = tuple_size(tensor.shape)
      strides = opts[:strides] || List.duplicate(1, rank)
      padding = opts[:padding] || List.duplicate({0, 0}, rank)

      with true <- real_compute_type?(index, nif_type) and real_compute_type?(index, in_type),
           true <- rank_ok?(tensor) and is_list(strides) and is_list(padding),
           {:ok, a} <- operand(tensor, in_type, index),
           {:ok, s} <- operand(source, nif_type, index),
           {:ok, init} <- read_operand(init_value, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          ref =
            alloc(index, fn ->
              NIF.window_scatter(
                nif_op,
                a,
                s,
                init,
                dims(tensor),
                Tuple.to_list(window),
                strides,
                Enum.map(padding, &elem(&1, 0)),
                Enum.map(padding, &elem(&1, 1))
              )
            end)

          wrap(out, ref, index)
        end
      else
        _ -> host(op, [out | args] ++ [window, opts], no_kernel(op, type, index))
      end
    end

    ## Convolution

    # A direct convolution on the device in the canonical layouts: input
    # and kernel are converted to the output type and transposed to
    # [batch, channels, spatial...] and [output, input, spatial...] where
    # their permutations ask for it, and the result is transposed to the
    # output permutation. Every option runs natively (strides, padding of
    # any sign, input and kernel dilation, feature and batch groups), so
    # conv's gradients, themselves convolutions, stay on the device.
    impl_if_callback(:conv, 4)

    def conv(%T{type: type} = out, %T{} = input, %T{} = kernel, opts) do
      index = device_of_args([input, kernel])
      nif_type = nif_type!(type, :conv, index)

      with true <- compute_type?(index, nif_type),
           true <- rank_ok?(input) and rank_ok?(kernel),
           {:ok, a} <- operand(input, nif_type, index),
           {:ok, k} <- operand(kernel, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          wrap(out, conv_canonical(out, {input, a}, {kernel, k}, opts, index), index)
        end
      else
        _ -> host(:conv, [out, input, kernel, opts], no_kernel(:conv, type, index))
      end
    end

    defp conv_canonical(out, {input, a}, {kernel, k}, opts, index) do
      rank = tuple_size(out.shape)
      identity = Enum.to_list(0..(rank - 1))
      spatial = rank - 2
      {a, in_dims} = permuted(a, dims(input), opts[:input_permutation] || identity, index)
      {k, k_dims} = permuted(k, dims(kernel), opts[:kernel_permutation] || identity, index)
      out_perm = opts[:output_permutation] || identity
      out_dims = Enum.map(out_perm, &elem(out.shape, &1))
      padding = opts[:padding] || List.duplicate({0, 0}, spatial)
      ones = List.duplicate(1, spatial)

      ref =
        alloc(index, fn ->
          NIF.conv(
            a,
            k,
            in_dims,
            k_dims,
            out_dims,
            opts[:strides] || ones,
            Enum.map(padding, &elem(&1, 0)),
            Enum.map(padding, &elem(&1, 1)),
            opts[:input_dilation] || ones,
            opts[:kernel_dilation] || ones,
            opts[:feature_group_size] || 1,
            opts[:batch_group_size] || 1
          )
        end)

      inverse = out_perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

      if in_order?(out_dims, inverse),
        do: ref,
        else: alloc(index, fn -> NIF.transpose(out_dims, ref, inverse) end)
    end

    # A dense tensor ref of dims transposed by perm, with its new dims.
    defp permuted(ref, dims, perm, index) do
      new_dims = Enum.map(perm, &Enum.at(dims, &1))

      if in_order?(dims, perm),
        do: {ref, new_dims},
        else: {alloc(index, fn -> NIF.transpose(dims, ref, perm) end), new_dims}
    end

    # Whether transposing a dense tensor of dims by perm leaves every
    # element where it is: only axes of one element move (the kernel
    # gradient's swap of a one-channel input's batch and channel axes).
    defp in_order?(dims, perm) do
      kept = for axis <- perm, Enum.at(dims, axis) != 1, do: axis
      kept == Enum.sort(kept)
    end

    ## Sorting

    # A stable bitonic sort of rows (the axis moved last when it is not),
    # in Nx.BinaryBackend's order (NaN last ascending, first descending).
    impl_if_callback(:sort, 3)
    def sort(out, tensor, opts), do: sort_op(:sort, out, tensor, opts)

    impl_if_callback(:argsort, 3)
    def argsort(out, tensor, opts), do: sort_op(:argsort, out, tensor, opts)

    defp sort_op(op, %T{type: out_type} = out, %T{type: type} = tensor, opts) do
      index = device_of(tensor)
      nif_type = nif_type!(type, op, index)
      out_nif = nif_type!(out_type, op, index)
      t_dims = dims(tensor)
      rank = length(t_dims)
      axis = opts[:axis] || rank - 1

      with true <- real_compute_type?(index, nif_type) and convert_type?(index, out_nif),
           true <- rank_ok?(tensor),
           {:ok, a} <- operand(tensor, nif_type, index) do
        cond do
          Nx.size(out) == 0 ->
            empty(out, index)

          rank == 0 and op == :sort ->
            wrap(out, a, index)

          true ->
            perm =
              if rank == 0, do: [], else: List.delete(Enum.to_list(0..(rank - 1)), axis) ++ [axis]

            moved? = perm != Enum.to_list(0..(rank - 1)//1)
            a = if moved?, do: alloc(index, fn -> NIF.transpose(t_dims, a, perm) end), else: a
            len = if rank == 0, do: 1, else: Enum.at(t_dims, axis)
            rows = div(Nx.size(tensor), len)
            want = if op == :sort, do: :values, else: :indices
            desc = opts[:direction] == :desc
            ref = alloc(index, fn -> NIF.sort(a, rows, len, desc, want) end)

            ref =
              if moved? do
                inverse = Enum.map(0..(rank - 1), fn i -> Enum.find_index(perm, &(&1 == i)) end)
                moved_dims = Enum.map(perm, &Enum.at(t_dims, &1))
                alloc(index, fn -> NIF.transpose(moved_dims, ref, inverse) end)
              else
                ref
              end

            ref =
              if op == :argsort and out_nif != :s64,
                do: alloc(index, fn -> NIF.convert(out_nif, [Nx.size(out)], ref, 0, nil) end),
                else: ref

            wrap(out, ref, index)
        end
      else
        _ -> host(op, [out, tensor, opts], no_kernel(op, type, index))
      end
    end

    ## Indexed reads and writes

    # gather, take and take_along_axis are one kernel: every output axis
    # steps through the source, the index tensor (s64), or both; the index
    # tuple picks the position along the indexed source axes (clamped to
    # them, as XLA does; Nx.BinaryBackend raises on out-of-range indices).
    impl_if_callback(:gather, 4)

    def gather(%T{} = out, %T{} = tensor, %T{} = indices, opts) do
      t_dims = dims(tensor)
      i_dims = dims(indices)
      axes = opts[:axes] || Enum.to_list(0..(length(i_dims) - 2)//1)
      t_str = dense_strides(t_dims)
      i_str = dense_strides(i_dims)
      rest = Enum.reject(0..(length(t_dims) - 1)//1, &(&1 in axes))
      batch = length(i_dims) - 1

      spec = %{
        src: Enum.map(1..batch//1, fn _ -> 0 end) ++ Enum.map(rest, &Enum.at(t_str, &1)),
        idx: Enum.take(i_str, batch) ++ Enum.map(rest, fn _ -> 0 end),
        axis_dims: Enum.map(axes, &Enum.at(t_dims, &1)),
        axis_strides: Enum.map(axes, &Enum.at(t_str, &1))
      }

      indexed_read(:gather, out, tensor, indices, spec, [out, tensor, indices, opts])
    end

    impl_if_callback(:take, 4)

    def take(%T{} = out, %T{} = tensor, %T{} = indices, axis) do
      t_dims = dims(tensor)
      t_str = dense_strides(t_dims)
      {pre, [_ | post]} = Enum.split(t_str, axis)
      i_str = dense_strides(dims(indices))

      spec = %{
        src: pre ++ Enum.map(i_str, fn _ -> 0 end) ++ post,
        idx: Enum.map(pre, fn _ -> 0 end) ++ i_str ++ Enum.map(post, fn _ -> 0 end),
        axis_dims: [Enum.at(t_dims, axis)],
        axis_strides: [Enum.at(t_str, axis)]
      }

      indexed_read(:take, out, tensor, indices, spec, [out, tensor, indices, axis])
    end

    impl_if_callback(:take_along_axis, 4)

    def take_along_axis(%T{} = out, %T{} = tensor, %T{} = indices, axis) do
      t_dims = dims(tensor)
      t_str = dense_strides(t_dims)

      src =
        Enum.zip_with([t_dims, t_str, Enum.to_list(0..(length(t_dims) - 1)//1)], fn
          [_, _, ^axis] -> 0
          [1, _, _] -> 0
          [_, stride, _] -> stride
        end)

      spec = %{
        src: src,
        idx: dense_strides(dims(indices)),
        axis_dims: [Enum.at(t_dims, axis)],
        axis_strides: [Enum.at(t_str, axis)]
      }

      indexed_read(:take_along_axis, out, tensor, indices, spec, [out, tensor, indices, axis])
    end

    defp indexed_read(op, %T{type: type} = out, tensor, indices, spec, args) do
      index = device_of_args([tensor, indices])
      nif_type = nif_type!(type, op, index)

      with true <- compute_type?(index, nif_type) and rank_ok?(out) and rank_ok?(tensor),
           true <- integer_type?(indices.type) and convert_type?(index, :s64),
           true <- length(spec.src) == tuple_size(out.shape),
           {:ok, a} <- operand(tensor, nif_type, index),
           {:ok, i} <- operand(indices, :s64, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          ref =
            alloc(index, fn ->
              NIF.gather(
                a,
                0,
                i,
                dims(out),
                spec.src,
                spec.idx,
                spec.axis_dims,
                spec.axis_strides
              )
            end)

          wrap(out, ref, index)
        end
      else
        _ -> host(op, args, no_kernel(op, type, index))
      end
    end

    # indexed_put/indexed_add: a copy of the target in the output type,
    # written in place by one thread per slice position walking the updates
    # in order (the last put wins, adds accumulate in order, as in
    # Nx.BinaryBackend). Updates with an out-of-range index are skipped (as
    # XLA does; Nx.BinaryBackend raises).
    for {op, nif_op} <- [indexed_put: :put, indexed_add: :add] do
      impl_if_callback(op, 5)

      def unquote(op)(out, target, indices, updates, opts),
        do: indexed_write(unquote(op), unquote(nif_op), out, target, indices, updates, opts)
    end

    defp indexed_write(op, nif_op, %T{type: type} = out, target, indices, updates, opts) do
      index = device_of_args([target, indices, updates])
      nif_type = nif_type!(type, op, index)
      t_dims = dims(target)
      t_str = dense_strides(t_dims)

      {count, depth} =
        {elem(indices.shape, 0), elem(indices.shape, tuple_size(indices.shape) - 1)}

      axes = opts[:axes] || Enum.to_list(0..(depth - 1)//1)
      rest = Enum.reject(0..(length(t_dims) - 1)//1, &(&1 in axes))
      slice = Enum.map(rest, &Enum.at(t_dims, &1))

      with true <- compute_type?(index, nif_type) and rank_ok?(out),
           true <- integer_type?(indices.type) and convert_type?(index, :s64),
           true <- tuple_size(indices.shape) == 2 and length(axes) == depth,
           true <- Nx.size(updates) == count * Enum.product(slice),
           {:ok, t} <- operand(target, nif_type, index),
           {:ok, i} <- operand(indices, :s64, index),
           {:ok, u} <- operand(updates, nif_type, index) do
        if Nx.size(out) == 0 do
          empty(out, index)
        else
          # A fresh copy: the kernel writes in place.
          dst = alloc(index, fn -> NIF.convert(nif_type, t_dims, t, 0, nil) end)

          :ok =
            NIF.scatter(
              nif_op,
              dst,
              u,
              i,
              count,
              slice,
              Enum.map(rest, &Enum.at(t_str, &1)),
              Enum.map(axes, &Enum.at(t_dims, &1)),
              Enum.map(axes, &Enum.at(t_str, &1))
            )

          wrap(out, dst, index)
        end
      else
        _ -> host(op, [out, target, indices, updates, opts], no_kernel(op, type, index))
      end
    end

    # all/any: min/max of unsigned integers, or of the non-zero mask (u8) of
    # other types, compared with 0.
    for {op, nif_op} <- [all: :min, any: :max] do
      impl_if_callback(op, 3)

      def unquote(op)(out, tensor, opts),
        do: logical_reduction(unquote(op), unquote(nif_op), out, tensor, opts)
    end

    defp logical_reduction(op, nif_op, %T{type: {:u, 8}} = out, %T{type: type} = tensor, opts) do
      index = device_of(tensor)

      with {:ok, nif_type} <- Map.fetch(@nif_types, type),
           true <- supported?(index, :compare, :not_equal, nif_type) and rank_ok?(tensor),
           {:ok, t} <- operand(tensor, nif_type, index) do
        shape = dims(tensor)
        axes = opts[:axes] || Nx.axes(tensor)
        rank = length(shape)

        # Unsigned integers (the u8 results of comparisons) need no mask:
        # their minimum (maximum) is non-zero exactly when all (any) are.
        {src, src_type} =
          if elem(type, 0) == :u and supported?(index, :compare, :greater, nif_type) do
            {t, nif_type}
          else
            zero = fill(index, nif_type, 1, convert_value(0, {:s, 64}, type))

            mask =
              alloc(index, fn ->
                NIF.compare(:not_equal, shape, t, 0, nil, zero, 0, List.duplicate(0, rank))
              end)

            {mask, :u8}
          end

        r = alloc(index, fn -> NIF.reduce(nif_op, shape, src, 0, nil, axes, src_type) end)
        # r > 0 as u8; also right for empty reductions, whose identities
        # are the type's maximum (all: true) and 0 (any: false).
        zero = convert_value(0, {:s, 64}, nif_type_to_nx(src_type))

        wrap(
          out,
          alloc(index, fn -> NIF.compare(:greater, dims(out), r, 0, nil, zero, 0, nil) end),
          index
        )
      else
        _ -> host(op, [out, tensor, opts], no_kernel(op, type, index))
      end
    end

    defp logical_reduction(op, _nif_op, out, tensor, opts),
      do: host(op, [out, tensor, opts], no_kernel(op, tensor.type, device_of(tensor)))

    ## Dot

    impl_if_callback(:dot, 7)

    # The common product first: two dense matrices of out's type on one
    # device, one axis contracted each (x . w and both of its gradients).
    # Their [batch, rows, cols] strides are those matmul_operand/4 works
    # out (0 along a group of one element), written down directly.
    def dot(
          %T{type: type} = out,
          %T{type: type, shape: {l0, l1}, vectorized_axes: [], data: %__MODULE__{} = ld} = left,
          [c1],
          [],
          %T{type: type, shape: {r0, r1}, vectorized_axes: [], data: %__MODULE__{} = rd} = right,
          [c2],
          []
        )
        when is_reference(ld.ref) and ld.strides == nil and ld.value == nil and
               is_reference(rd.ref) and rd.strides == nil and rd.value == nil and
               ld.device == rd.device and l0 * l1 * r0 * r1 > 0 do
      index = ld.device
      nif_type = nif_type!(type, :dot, index)

      if compute_type?(index, nif_type) do
        {m, k, a_strides} =
          if c1 == 1,
            do: {l0, l1, [0, dense_stride(l0, l1), dense_stride(l1, 1)]},
            else: {l1, l0, [0, dense_stride(l1, 1), dense_stride(l0, l1)]}

        {n, b_strides} =
          if c2 == 0,
            do: {r1, [0, dense_stride(r0, r1), dense_stride(r1, 1)]},
            else: {r0, [0, dense_stride(r1, 1), dense_stride(r0, r1)]}

        {a, b} = {ld.ref, rd.ref}
        ref = alloc(index, fn -> NIF.matmul(1, m, n, k, a, 0, a_strides, b, 0, b_strides) end)
        wrap(out, ref, index)
      else
        host(:dot, [out, left, [c1], [], right, [c2], []], no_kernel(:dot, type, index))
      end
    end

    def dot(%T{type: type} = out, left, c1, b1, right, c2, b2) do
      index = device_of_args([left, right])
      nif_type = nif_type!(type, :dot, index)
      l_free = Nx.axes(left) -- (c1 ++ b1)
      r_free = Nx.axes(right) -- (c2 ++ b2)

      with true <- compute_type?(index, nif_type) and rank_ok?(left) and rank_ok?(right),
           {:ok, a} <- matmul_operand(left, nif_type, index, [b1, l_free, c1]),
           {:ok, b} <- matmul_operand(right, nif_type, index, [b2, c2, r_free]) do
        batch = product_of(left.shape, b1)
        m = product_of(left.shape, l_free)
        k = product_of(left.shape, c1)
        n = product_of(right.shape, r_free)

        cond do
          Nx.size(out) == 0 ->
            empty(out, index)

          k == 0 ->
            wrap(out, fill(index, nif_type, Nx.size(out), scalar_bytes(type, 0)), index, 0)

          true ->
            {a, a_offset, a_strides} = a
            {b, b_offset, b_strides} = b

            ref =
              alloc(index, fn ->
                NIF.matmul(batch, m, n, k, a, a_offset, a_strides, b, b_offset, b_strides)
              end)

            wrap(out, ref, index)
        end
      else
        _ -> host(:dot, [out, left, c1, b1, right, c2, b2], no_kernel(:dot, type, index))
      end
    end

    # The operand as a [batch, rows, cols] strided view {ref, offset,
    # strides}: each group of axes must be traversable with one stride, else
    # the operand is transposed (and converted, in the same pass) on the
    # device into that order.
    defp matmul_operand(%T{shape: shape} = tensor, nif_type, index, groups) do
      target = nif_type_to_nx(nif_type)
      dims = Tuple.to_list(shape)
      strides = List.to_tuple(layout_strides(tensor))
      group_strides = Enum.map(groups, &group_stride(&1, shape, strides))
      perm = Enum.concat(groups)
      [_, rows, cols] = sizes = Enum.map(groups, &product_of(shape, &1))
      # A group of several elements read with stride 0 (a broadcast view)
      # is copied out like a group that is not contiguous.
      in_place? =
        Enum.zip_with(group_strides, sizes, &(is_integer(&1) and (&1 != 0 or &2 <= 1)))
        |> Enum.all?()

      empty? = Enum.member?(dims, 0)

      case tensor do
        _ when empty? ->
          {:ok, {nil, 0, [0, 0, 0]}}

        %T{type: ^target, data: %__MODULE__{device: ^index, value: nil, ref: ref}} ->
          if in_place? do
            {:ok, {ref, 0, group_strides}}
          else
            permuted = Enum.map(perm, &elem(shape, &1))
            permuted_strides = Enum.map(perm, &elem(strides, &1))

            {:ok,
             {strided_read(index, permuted, ref, 0, permuted_strides), 0, [rows * cols, cols, 1]}}
          end

        %T{data: %__MODULE__{device: ^index, value: nil, ref: ref}} ->
          if convertible?(index, tensor.type) and compute_type?(index, nif_type) do
            permuted = Enum.map(perm, &elem(shape, &1))
            permuted_strides = Enum.map(perm, &elem(strides, &1))

            ref =
              alloc(index, fn -> NIF.convert(nif_type, permuted, ref, 0, permuted_strides) end)

            {:ok, {ref, 0, [rows * cols, cols, 1]}}
          else
            :error
          end

        _ ->
          with {:ok, ref} <- operand(tensor, nif_type, index) do
            data = %__MODULE__{ref: ref, device: index}
            matmul_operand(%{tensor | type: target, data: data}, nif_type, index, groups)
          end
      end
    end

    # The stride of a group of axes read as one flattened axis, or nil when
    # the group is not contiguous in that order (shape and strides as
    # tuples).
    defp group_stride(axes, shape, strides) do
      pairs =
        for axis <- axes, elem(shape, axis) != 1, do: {elem(shape, axis), elem(strides, axis)}

      cond do
        pairs == [] -> 0
        contiguous_pairs?(pairs) -> pairs |> List.last() |> elem(1)
        true -> nil
      end
    end

    # Whether each {dim, stride} steps over exactly the next one's extent.
    defp contiguous_pairs?([{_, outer} | [{dim, inner} | _] = rest]),
      do: outer == inner * dim and contiguous_pairs?(rest)

    defp contiguous_pairs?(_), do: true

    defp product_of(shape, axes), do: Enum.reduce(axes, 1, &(elem(shape, &1) * &2))

    # The stride group_stride/3 gives an axis of size dim read with stride.
    defp dense_stride(1, _stride), do: 0
    defp dense_stride(_dim, stride), do: stride

    ## Callbacks computed on the host

    # The same callback on Nx.BinaryBackend.
    host_callbacks = [map: 4]

    # Optional callbacks: exported only where Nx.BinaryBackend implements
    # them; otherwise Nx calls optional/3 with the default implementation.
    Code.ensure_loaded!(Nx.BinaryBackend)

    optional_callbacks =
      for {op, arity} <- [
            determinant: 2,
            logical_not: 2,
            fft2: 3,
            ifft2: 3
          ],
          function_exported?(Nx.BinaryBackend, op, arity),
          do: {op, arity}

    for {op, arity} <- host_callbacks ++ optional_callbacks do
      args = Macro.generate_arguments(arity, __MODULE__)
      impl_if_callback(op, arity)
      def unquote(op)(unquote_splicing(args)), do: host(unquote(op), unquote(args), "no kernel")
    end

    ## Linear algebra

    # Nx's eps for the Cholesky factorization (Nx.LinAlg.Cholesky's
    # default): added to each divisor; entries no larger are set to zero.
    @cholesky_eps 1.0e-10

    # The kernels' largest order (NXV_CHOLESKY_MAX_ORDER).
    @cholesky_max_order 65_535

    impl_if_callback(:cholesky, 2)

    # The Cholesky factor of each matrix on the device for f32 and f64 (an
    # integer input converted to f32 first, f16 and bf16 computed in f32
    # and converted back): one dispatch up to order 64, panels of 32
    # columns beyond; complex types and devices without the kernels on the
    # host.
    def cholesky(%T{type: out_type, shape: shape} = out, %T{} = tensor) do
      index = device_of(tensor)
      n = elem(shape, tuple_size(shape) - 1)
      compute = linalg_type(out_type)

      with true <- compute != nil and rank_ok?(tensor) and linalg?(index, compute),
           true <- n <= @cholesky_max_order,
           {:ok, a} <- operand(tensor, compute, index) do
        if Nx.size(shape) == 0 do
          empty(out, index)
        else
          batch = div(Nx.size(shape), n * n)
          ref = alloc(index, fn -> NIF.cholesky(a, batch, n, @cholesky_eps) end)
          wrap(out, linalg_result(ref, compute, out, index), index)
        end
      else
        _ -> cholesky_host(out, tensor, index)
      end
    end

    defp cholesky_host(out, tensor, index) do
      reason = no_kernel(:cholesky, tensor.type, index)

      if function_exported?(Nx.BinaryBackend, :cholesky, 2) do
        host(:cholesky, [out, tensor], reason)
      else
        host_apply(:cholesky, [tensor], reason, fn [t] -> Nx.LinAlg.cholesky(t) end)
      end
    end

    # The largest order nxv_lu takes on CPU devices (llvmpipe's loop limit).
    @lu_cpu_max 14_848

    # Whether the device is a CPU (llvmpipe), cached.
    defp cpu_device?(index) do
      key = {__MODULE__, :cpu_device, index}

      with nil <- :persistent_term.get(key, nil),
           do: remember(key, NIF.device_info(index).type == :cpu)
    end

    impl_if_callback(:lu, 3)

    # LU factorizations with partial pivoting (A = P L U) of each matrix on
    # the device, types as cholesky/2 takes them (P converted to the
    # input's type); complex types and devices without the kernels on the
    # host. Entries of L and U below the `:eps` option in magnitude are
    # zero, as Nx.BinaryBackend writes them.
    def lu({p_out, %T{type: out_type} = l_out, u_out} = outs, %T{shape: shape} = tensor, opts) do
      index = device_of(tensor)
      n = elem(shape, tuple_size(shape) - 1)
      compute = linalg_type(out_type)

      with true <- compute != nil and rank_ok?(tensor) and linalg?(index, compute),
           true <- n <= @cholesky_max_order and (n <= @lu_cpu_max or not cpu_device?(index)),
           {:ok, a} <- operand(tensor, compute, index) do
        if Nx.size(shape) == 0 do
          {empty(p_out, index), empty(l_out, index), empty(u_out, index)}
        else
          batch = div(Nx.size(shape), n * n)
          eps = Keyword.get(opts, :eps, 1.0e-10) * 1.0
          {p, l, u} = alloc(index, fn -> NIF.lu(a, batch, n, eps) end)

          {wrap(p_out, linalg_result(p, compute, p_out, index), index),
           wrap(l_out, linalg_result(l, compute, l_out, index), index),
           wrap(u_out, linalg_result(u, compute, u_out, index), index)}
        end
      else
        _ -> host(:lu, [outs, tensor, opts], no_kernel(:lu, tensor.type, index))
      end
    end

    # qr.comp indexes a matrix's elements in 32 bits.
    @qr_max_elems 4_294_967_296

    impl_if_callback(:qr, 3)

    # QR factorizations by Householder reflections (Nx.LinAlg.QR's
    # definition: R's diagonal non-negative where a column is reflected)
    # of each matrix on the device, types as cholesky/2 takes them;
    # complex types and devices without the kernels take Nx's default
    # implementation on the host. Entries of Q and R of at most the `:eps`
    # option in magnitude are zero, as Nx's implementation flushes them.
    def qr({q_out, %T{type: out_type} = r_out} = outs, %T{shape: shape} = tensor, opts) do
      index = device_of(tensor)
      rank = tuple_size(shape)
      {m, n} = {elem(shape, rank - 2), elem(shape, rank - 1)}
      compute = linalg_type(out_type)

      with true <- compute != nil and rank_ok?(tensor) and linalg?(index, compute),
           true <-
             m <= @cholesky_max_order and n <= @cholesky_max_order and m * n < @qr_max_elems,
           {:ok, a} <- operand(tensor, compute, index) do
        if Nx.size(shape) == 0 do
          # No elements: Q is the identity where it has any (n = 0 in
          # :complete mode), R empty.
          q =
            if Nx.size(q_out) == 0,
              do: empty(q_out, index),
              else: Nx.eye(q_out.shape, type: out_type, backend: {__MODULE__, device: index})

          {%{q | names: q_out.names}, empty(r_out, index)}
        else
          batch = div(Nx.size(shape), m * n)
          complete = opts[:mode] == :complete
          eps = Keyword.get(opts, :eps, 1.0e-10) * 1.0
          {q, r} = alloc(index, fn -> NIF.qr(a, batch, m, n, complete, eps) end)

          {wrap(q_out, linalg_result(q, compute, q_out, index), index),
           wrap(r_out, linalg_result(r, compute, r_out, index), index)}
        end
      else
        _ -> linalg_host(:qr, outs, tensor, opts, index, &Nx.LinAlg.qr/2)
      end
    end

    # A linear algebra callback with options on the host: Nx.BinaryBackend's
    # where it has one, else Nx's default implementation (fun) on host
    # copies.
    defp linalg_host(op, outs, tensor, opts, index, fun) do
      reason = no_kernel(op, tensor.type, index)

      if function_exported?(Nx.BinaryBackend, op, 3) do
        host(op, [outs, tensor, opts], reason)
      else
        host_apply(op, [tensor], reason, fn [t] -> fun.(t, opts) end)
      end
    end

    impl_if_callback(:eigh, 3)

    # Eigenvalues and eigenvectors of symmetric matrices as Nx.BinaryBackend
    # computes them (Nx 0.7.2's algorithm, so that the results are the
    # reference's): each matrix reduced to tridiagonal form by Householder
    # reflections, then unshifted QR iterations (each factorization the
    # device's qr, flushing entries under :eps) until the accumulated Q
    # moves by at most :eps (default 1.0e-4) in every entry, or :max_iter
    # (1000) iterations; entries under :eps in magnitude flushed. In
    # double where the device has f64 (Nx.BinaryBackend computes in Elixir
    # floats), after a download for the symmetry check: up to order 64 the
    # reduction and the iterations are one kernel that reads nothing back;
    # larger orders take device ops, the convergence test downloaded every
    # 8 iterations (every matrix of the batch at once; those converged are
    # kept as they are, so the steps past it change nothing). Complex types
    # and devices without the kernels run on the host.
    def eigh({vals_out, vecs_out} = outs, %T{shape: shape} = tensor, opts) do
      index = device_of(tensor)
      rank = tuple_size(shape)
      n = elem(shape, rank - 1)
      compute = linalg_type(vecs_out.type)

      with true <- compute != nil and rank_ok?(tensor) and linalg?(index, compute),
           true <- n <= @cholesky_max_order do
        if Nx.size(shape) == 0 do
          {empty(vals_out, index), empty(vecs_out, index)}
        else
          work = if linalg?(index, :f64), do: {:f, 64}, else: {:f, 32}
          eps = Keyword.get(opts, :eps, 1.0e-4) * 1.0
          # Nx.BinaryBackend iterates over 1..max_iter, a range that counts
          # down where max_iter < 1 (2 - max_iter steps).
          max_iter = Keyword.get(opts, :max_iter, 1_000)
          max_iter = if max_iter < 1, do: 2 - max_iter, else: max_iter
          batch = div(Nx.size(shape), n * n)
          a = tensor |> Nx.as_type(work) |> Nx.reshape({batch, n, n})
          # svd/3 passes symmetric: true for its H, symmetrized as (H + H^T) / 2
          # and so symmetric exactly: no download for the check.
          unless opts[:symmetric], do: eigh_check_symmetric(a, eps)
          {a, q} = eigh_reduce_iterate(a, n, eps, max_iter, batch, index)

          vals = a |> diagonals() |> eigh_flush(eps)

          {%{
             (vals
              |> Nx.as_type(vals_out.type)
              |> Nx.reshape(vals_out.shape))
             | names: vals_out.names
           },
           %{
             (q
              |> eigh_flush(eps)
              |> Nx.as_type(vecs_out.type)
              |> Nx.reshape(vecs_out.shape))
             | names: vecs_out.names
           }}
        end
      else
        _ -> linalg_host(:eigh, outs, tensor, opts, index, &Nx.LinAlg.eigh/2)
      end
    end

    # Nx.BinaryBackend's test: every |A^T - A| at most eps (NaN passes).
    defp eigh_check_symmetric(a, eps) do
      diff = Nx.abs(Nx.subtract(Nx.transpose(a, axes: [0, 2, 1]), a))

      symmetric = diff |> within_or_nan(eps) |> Nx.all() |> Nx.to_number()

      if symmetric != 1 do
        raise ArgumentError, "matrix must be hermitian, a matrix is hermitian iff X = adjoint(X)"
      end
    end

    # Nx.BinaryBackend's closeness test of eigh: each |difference| at most
    # eps, or NaN.
    defp within_or_nan(diff, eps), do: Nx.logical_or(Nx.less_equal(diff, eps), Nx.is_nan(diff))

    # Entries under eps in magnitude as zeros of their sign, as
    # Nx.BinaryBackend flushes them (0 * x).
    defp eigh_flush(x, eps), do: Nx.select(Nx.less(Nx.abs(x), eps), Nx.multiply(x, 0), x)

    # {Q^T A Q, Q}, Q the product of the Householder reflections of
    # columns 0 .. n - 3 below their subdiagonal (column n - 2's, of one
    # element, is the identity), entries under eps flushed.
    defp eigh_tridiagonal(a, n, eps, index) do
      {batch, _, _} = a.shape
      eye = Nx.broadcast(Nx.eye(n, type: a.type, backend: {__MODULE__, device: index}), a.shape)

      {h, q} =
        Enum.reduce(0..(n - 3)//1, {a, eye}, fn i, {h, q} ->
          r = eigh_reflector(h, i, n, batch, eps, eye)
          h = r |> Nx.dot([2], [0], h, [1], [0]) |> Nx.dot([2], [0], r, [1], [0])
          {h, Nx.dot(q, [2], [0], r, [1], [0])}
        end)

      {eigh_flush(h, eps), eigh_flush(q, eps)}
    end

    # The reflection I - scale v v^T of column i below row i, v 1 at row
    # i + 1 and x / v0 below; the identity where the squares below row
    # i + 1 sum under eps (as Nx.BinaryBackend's householder_reflector).
    defp eigh_reflector(h, i, n, batch, eps, eye) do
      len = n - i - 1
      x = h |> Nx.slice([0, i + 1, i], [batch, len, 1]) |> Nx.reshape({batch, len})
      a0 = Nx.slice(x, [0, 0], [batch, 1])
      norm_sq = Nx.sum(Nx.multiply(x, x), axes: [1], keep_axes: true)
      rest = Nx.subtract(norm_sq, Nx.multiply(a0, a0))
      norm = Nx.sqrt(norm_sq)

      v0 =
        Nx.select(
          Nx.less_equal(a0, 0),
          Nx.subtract(a0, norm),
          Nx.divide(Nx.negate(rest), Nx.add(a0, norm))
        )

      v0_sq = Nx.multiply(v0, v0)
      identity = Nx.less(rest, eps)
      scale = Nx.select(identity, 0, Nx.divide(Nx.multiply(2, v0_sq), Nx.add(rest, v0_sq)))
      tail = Nx.slice(x, [0, 1], [batch, len - 1])
      tail = Nx.select(Nx.broadcast(identity, tail.shape), tail, Nx.divide(tail, v0))

      v =
        Nx.concatenate([Nx.broadcast(Nx.tensor(1, type: x.type), {batch, 1}), tail], axis: 1)
        |> Nx.pad(0, [{0, 0, 0}, {i + 1, 0, 0}])

      outer = Nx.multiply(Nx.new_axis(v, 2), Nx.new_axis(v, 1))
      Nx.subtract(eye, Nx.multiply(Nx.new_axis(scale, 2), outer))
    end

    # Steps of eigh's iteration between two reads of its convergence test.
    @eigh_check 8

    # The largest order qr.comp reduces and iterates in one workgroup
    # (QR_SMALL in kernels/ops.c), and the most steps it takes
    # (NXV_EIGH_MAX_ITER: it issues them all up front).
    @eigh_kernel_max 64
    @eigh_kernel_steps 65_536

    # {A, Q} after the tridiagonal reduction and the QR iterations of the
    # symmetric batch a: up to order 64 one kernel does both (a workgroup
    # per matrix: nothing read back, tens to hundreds of steps a dispatch);
    # larger orders, and a :max_iter past the kernel's, take device ops, a
    # reflection or a step at a time.
    defp eigh_reduce_iterate(%T{type: type} = a, n, eps, max_iter, batch, index)
         when n <= @eigh_kernel_max and max_iter <= @eigh_kernel_steps do
      {:ok, ar} = operand(a, Map.fetch!(@nif_types, type), index)
      {ra, rq} = alloc(index, fn -> NIF.eigh_iterate(ar, nil, batch, n, max_iter, eps) end)
      {wrap(a, ra, index), wrap(a, rq, index)}
    end

    defp eigh_reduce_iterate(a, n, eps, max_iter, batch, index) do
      {h, q} = eigh_tridiagonal(a, n, eps, index)
      eigh_iterate(h, q, eps, max_iter, batch, index)
    end

    # Unshifted QR iterations from {a, q}: A <- R Q', Q <- Q Q' with
    # {Q', R} = qr(A); a matrix stops (its A and Q kept) once Q moved by at
    # most eps (NaN counts as still), all stop after max_iter.
    defp eigh_iterate(a, q, eps, max_iter, batch, index) do
      done = Nx.broadcast(Nx.tensor(0, type: :u8, backend: {__MODULE__, device: index}), {batch})

      {a, q, _} =
        Enum.reduce_while(1..max_iter//1, {a, q, done}, fn iter, {a, q, done} ->
          {qn, rn} = Nx.LinAlg.qr(a, eps: eps)
          a_new = Nx.dot(rn, [2], [0], qn, [1], [0])
          q_new = Nx.dot(q, [2], [0], qn, [1], [0])
          diff = Nx.abs(Nx.subtract(q, q_new))

          close = diff |> within_or_nan(eps) |> Nx.all(axes: [1, 2])

          keep = done |> Nx.reshape({batch, 1, 1}) |> Nx.broadcast(a.shape)

          state =
            {Nx.select(keep, a, a_new), Nx.select(keep, q, q_new), Nx.logical_or(done, close)}

          # Converged matrices stay as they are, so the test is read every
          # @eigh_check steps only (a download each): further steps change
          # nothing that has converged.
          if (rem(iter, @eigh_check) == 0 or iter == max_iter) and
               Nx.to_number(Nx.all(elem(state, 2))) == 1,
             do: {:halt, state},
             else: {:cont, state}
        end)

      {a, q}
    end

    impl_if_callback(:svd, 3)

    # Singular value decompositions as Nx 0.7.2's default implementation
    # (Nx.LinAlg.SVD, the defn Nx.BinaryBackend runs, having no svd of its
    # own) computes them, replicated step by step with device ops so that
    # the results are the reference's: a wide matrix through its adjoint; a
    # tall one reduced to square by QR (with :full_matrices? always, else
    # when m > 1.15 n); the polar decomposition A = U H by QDWH iterations;
    # H's eigh (max_iter: :max_iter), its eigenvalues made non-negative and
    # sorted; U times the eigenvectors, re-orthogonalized by QR where the
    # matrix is rank deficient. The defn cannot run on the device itself:
    # its cached trace would keep device constants, which a later host run
    # of it would read. Matrices of zeros give identities and zero singular
    # values, one by one in a batch (the defn's vectorized `if` selects per
    # matrix). Integer inputs compute in f32, as Nx's output type; complex
    # types and devices without the kernels run on the host.
    def svd({_u_out, s_out, _vt_out} = outs, %T{shape: shape} = tensor, opts) do
      index = device_of(tensor)
      rank = tuple_size(shape)
      {m, n} = {elem(shape, rank - 2), elem(shape, rank - 1)}
      compute = linalg_type(s_out.type)

      with true <- compute != nil and rank_ok?(tensor) and linalg?(index, compute),
           true <- m + n <= @cholesky_max_order and (m + n) * (m + n) < @qr_max_elems do
        if Nx.size(shape) == 0,
          do: svd_result(outs, svd_zeros(outs, index)),
          else: svd_device(outs, tensor, {m, n}, opts, index)
      else
        _ -> linalg_host(:svd, outs, tensor, opts, index, &Nx.LinAlg.svd/2)
      end
    end

    # Nx.LinAlg.SVD's eps (f32's).
    @svd_eps 1.1920929e-07

    # The batch of matrices as {b, m, n}, zero matrices replaced with the
    # identity (their results are the zero case's whatever this computes;
    # the defn computes the other branch on them too and discards it), the
    # decomposition, then the zero case selected per matrix.
    defp svd_device({_, s_out, _} = outs, tensor, {m, n}, opts, index) do
      type = svd_type(s_out.type, index)
      batch = div(Nx.size(tensor), m * n)
      a = tensor |> Nx.as_type(type) |> Nx.reshape({batch, m, n})
      zero = a |> Nx.equal(0) |> Nx.all(axes: [1, 2]) |> Nx.reshape({batch, 1, 1})

      a =
        select_matrices(
          zero,
          Nx.eye(a.shape, type: type, backend: {__MODULE__, device: index}),
          a
        )

      # Nx.LinAlg.svd's default, for callers that leave it out.
      opts = Keyword.put_new(opts, :max_iter, 100)
      {u, s, vt} = svd_non_zero(a, opts, index)
      {zu, zs, zvt} = svd_zeros({u, s, vt}, index)
      s_zero = Nx.reshape(zero, {batch, 1})

      result =
        {select_matrices(zero, zu, u), select_matrices(s_zero, zs, s),
         select_matrices(zero, zvt, vt)}

      svd_result(outs, result)
    end

    # The type the decomposition computes in: Nx's output type (f16 and
    # bf16 as Nx computes them, QDWH's loop in f32) where the device computes
    # on it, f32 otherwise.
    defp svd_type({:f, 64}, _index), do: {:f, 64}

    defp svd_type(type, index) do
      if compute_type?(index, Map.fetch!(@nif_types, type)), do: type, else: {:f, 32}
    end

    # The zero case's {U, S, V^T} (identities and zeros) in the shapes and
    # type of the templates given.
    defp svd_zeros({u, s, vt}, index) do
      backend = {__MODULE__, device: index}

      eye = fn t ->
        if Nx.size(t) == 0,
          do: empty(t, index),
          else: Nx.eye(t.shape, type: t.type, backend: backend)
      end

      zeros =
        if Nx.size(s) == 0,
          do: empty(s, index),
          else: Nx.broadcast(Nx.tensor(0, type: s.type, backend: backend), s.shape)

      {eye.(u), zeros, eye.(vt)}
    end

    # The results in the templates' types, shapes and names.
    defp svd_result({u_out, s_out, vt_out}, {u, s, vt}) do
      for {out, t} <- [{u_out, u}, {s_out, s}, {vt_out, vt}] do
        %{(t |> Nx.as_type(out.type) |> Nx.reshape(out.shape)) | names: out.names}
      end
      |> List.to_tuple()
    end

    # svd_non_zero: a wide matrix decomposed as its adjoint, U and V
    # swapping places.
    defp svd_non_zero(%T{shape: {_, m, n}} = a, opts, index) do
      flipped = m < n
      a = if flipped, do: batch_transpose(a), else: a

      {u, s, v} =
        if opts[:full_matrices?],
          do: svd_full(a, opts, index),
          else: svd_reduced(a, opts, index)

      if flipped, do: {v, s, batch_transpose(u)}, else: {u, s, batch_transpose(v)}
    end

    # svd_full: a tall matrix through its complete QR, A = Q R: R's square
    # part decomposed, U = [Q1 U_R, Q2] with Q2 the columns spanning the
    # rest.
    defp svd_full(%T{shape: {b, m, n}} = a, opts, index) when m > n do
      {q, r} = Nx.LinAlg.qr(a, mode: :complete)
      {u, s, v} = r |> Nx.slice([0, 0, 0], [b, n, n]) |> svd_tall_and_square(opts, index)
      q1 = Nx.slice(q, [0, 0, 0], [b, m, n])
      u_null = Nx.slice(q, [0, 0, n], [b, m, m - n])
      {Nx.concatenate([batch_dot(q1, u), u_null], axis: 2), s, v}
    end

    defp svd_full(a, opts, index), do: svd_tall_and_square(a, opts, index)

    # svd_non_full: a matrix of more than 1.15 n rows through its reduced
    # QR. The defn compares m with 1.15 * n as f32 (Nx.greater of two
    # numbers), so 115 x 100 is not reduced.
    defp svd_reduced(%T{shape: {_, m, n}} = a, opts, index) do
      <<limit::float-32-native>> = <<1.15 * n::float-32-native>>

      if m > limit do
        {q, r} = Nx.LinAlg.qr(a)
        {u, s, v} = svd_tall_and_square(r, opts, index)
        {batch_dot(q, u), s, v}
      else
        svd_tall_and_square(a, opts, index)
      end
    end

    # svd_tall_and_square: A = U H, H = V diag(s) V^T by eigh; eigenvalues
    # made non-negative (their eigenvectors negated), sorted in descending
    # order (a stable sort, as Nx.BinaryBackend's), U V. Where s (in eigh's
    # order) has its first value under n eps times the largest, U V is
    # replaced by the Q of its QR with columns signed by R's diagonal. (The
    # defn symmetrizes H once more first: H is symmetric already, so that
    # gives H exactly.)
    defp svd_tall_and_square(%T{shape: {_, _, n}} = a, opts, index) do
      {u, h} = qdwh(a, opts[:max_iter], index)
      # eigh/3 itself, told that H is symmetric (it is, exactly), so that
      # it skips the check Nx.LinAlg.eigh/2 would download.
      {b, _, _} = h.shape
      templates = {Nx.template({b, n}, h.type), Nx.template(h.shape, h.type)}
      {s, v} = eigh(templates, h, max_iter: opts[:max_iter], symmetric: true)
      sign = Nx.select(Nx.less(s, 0), -1, 1)
      v = Nx.multiply(Nx.new_axis(sign, 1), v)
      s = Nx.multiply(sign, s)
      order = Nx.argsort(s, axis: 1, direction: :desc)
      s_out = Nx.take_along_axis(s, order, axis: 1)
      v_out = Nx.take_along_axis(v, Nx.broadcast(Nx.new_axis(order, 1), v.shape), axis: 2)
      u_out = batch_dot(u, v_out)
      first = Nx.slice_along_axis(s, 0, 1, axis: 1)
      largest = Nx.slice_along_axis(s_out, 0, 1, axis: 1)
      deficient = first |> Nx.less(Nx.multiply(n * @svd_eps, largest)) |> Nx.new_axis(2)
      {select_matrices(deficient, svd_correct_rank(u_out), u_out), s_out, v_out}
    end

    # correct_rank_deficiency: Q of U's QR, its columns multiplied by the
    # signs of R's diagonal (0 where it is 0).
    defp svd_correct_rank(u) do
      {q, r} = Nx.LinAlg.qr(u)
      diagonal = diagonals(r)
      sign = Nx.select(Nx.less(diagonal, 0), -1, 1)
      sign = Nx.select(Nx.equal(diagonal, 0), 0, sign)
      Nx.multiply(q, Nx.new_axis(sign, 1))
    end

    # qdwh: the polar decomposition A = U H. U0 = A / alpha (alpha the
    # square root of A's 1-norm times its infinity-norm), iterated in f32
    # (f64 for f64); then one Newton-Schulz step in A's type,
    # U = 1.5 U - 0.5 U U^T U, and H = U^T A symmetrized.
    defp qdwh(%T{shape: {b, _, _}, type: type} = x, max_iter, index) do
      abs = Nx.abs(x)
      norm_1 = abs |> Nx.sum(axes: [1]) |> Nx.reduce_max(axes: [1])
      norm_inf = abs |> Nx.sum(axes: [2]) |> Nx.reduce_max(axes: [1])
      alpha = norm_1 |> Nx.sqrt() |> Nx.multiply(Nx.sqrt(norm_inf)) |> Nx.reshape({b, 1, 1})
      loop_type = if type == {:f, 64}, do: {:f, 64}, else: {:f, 32}
      u = x |> Nx.divide(alpha) |> Nx.as_type(loop_type) |> qdwh_iterate(max_iter, index)
      u = Nx.as_type(u, type)
      u = Nx.subtract(Nx.multiply(1.5, u), Nx.multiply(0.5, batch_dot(u, gram(u))))
      h = Nx.dot(u, [1], [0], x, [1], [0])
      h = Nx.divide(Nx.add(h, batch_transpose(h)), 2)
      {u, h}
    end

    # The defn's while loop, vectorized over the batch: each matrix iterates
    # until both l (the same sequence for every matrix) and its U have
    # converged (|1 - l| <= 5 eps and ||U - U_prev|| <= cbrt(5 eps)), or
    # after max_iter iterations (at least one); a matrix that has converged
    # keeps its U while the others go on. The test is read on the host once
    # l has converged, every iteration (QDWH converges in a few more), with
    # the triangular solves' flags.
    defp qdwh_iterate(%T{shape: {b, _, _}} = u, max_iter, index) do
      limit = max(max_iter, 1)
      tol_norm = qdwh_tol_norm()

      {u, _, _} =
        qdwh_coefficients()
        |> Stream.take(limit)
        |> Stream.with_index(1)
        |> Enum.reduce_while({u, nil, []}, fn {{step, l_moving}, iter}, {u, done, flags} ->
          {u_new, step_flags} = qdwh_step(u, step, index)
          flags = step_flags ++ flags
          u_new = if done, do: select_matrices(Nx.reshape(done, {b, 1, 1}), u, u_new), else: u_new

          cond do
            l_moving and iter < limit ->
              {:cont, {u_new, done, flags}}

            l_moving ->
              qdwh_check_flags(flags)
              {:halt, {u_new, done, []}}

            true ->
              diff = Nx.subtract(u_new, u)
              still = diff |> Nx.multiply(diff) |> Nx.sum(axes: [1, 2]) |> Nx.sqrt()
              stopped = Nx.logical_not(Nx.greater(still, tol_norm))
              done = if done, do: Nx.logical_or(done, stopped), else: stopped
              qdwh_check_flags(flags)

              if iter == limit or Nx.to_number(Nx.all(done)) == 1,
                do: {:halt, {u_new, done, []}},
                else: {:cont, {u_new, done, []}}
          end
        end)

      u
    end

    # The defn's cbrt(5 eps) as f32 (Nx.cbrt of a number).
    defp qdwh_tol_norm do
      Nx.tensor(5 * @svd_eps, type: :f32, backend: Nx.BinaryBackend)
      |> Nx.cbrt()
      |> Nx.to_number()
    end

    # The triangular solves' flags (zero diagonals cannot occur: Y Y^T =
    # c U^T U + I), read with the convergence test rather than after each
    # solve.
    defp qdwh_check_flags([]), do: :ok

    defp qdwh_check_flags(flags) do
      if Application.get_env(:nx_vulkan, :singular_check, true),
        do: check_solve_flags(Enum.reject(flags, &is_nil/1))
    end

    # The defn's scalars of each iteration, computed as it computes them
    # (f32 tensors on Nx.BinaryBackend, whatever U's type): l from eps by
    # the dynamically weighted Halley step, a, b, c from l; {step, l_moving}
    # with step the coefficients of the QR form (c > 100) or the Cholesky
    # form, l_moving whether |1 - l| > 5 eps after the step. They do not
    # depend on the matrices.
    defp qdwh_coefficients do
      Stream.unfold(Nx.tensor(@svd_eps, type: :f32, backend: Nx.BinaryBackend), fn l ->
        # The numbers below become tensors of the default backend: the
        # host's, so that no step of this goes to the device.
        Nx.with_default_backend(Nx.BinaryBackend, fn -> qdwh_coefficient(l) end)
      end)
    end

    defp qdwh_coefficient(l) do
      l2 = Nx.pow(l, 2)
      l2 = Nx.select(Nx.less(l2, @svd_eps), @svd_eps, l2)

      dd = 4.0 |> Nx.multiply(Nx.subtract(Nx.divide(1.0, l2), 1.0)) |> Nx.divide(l2) |> Nx.cbrt()

      sqd = Nx.sqrt(Nx.add(1.0, dd))
      ratio = Nx.divide(Nx.multiply(8.0, Nx.subtract(2.0, l2)), Nx.multiply(l2, sqd))
      root = 8.0 |> Nx.subtract(Nx.multiply(4.0, dd)) |> Nx.add(ratio) |> Nx.sqrt()
      a = Nx.add(sqd, Nx.divide(root, 2))
      b = a |> Nx.subtract(1.0) |> Nx.pow(2) |> Nx.divide(4.0)
      c = a |> Nx.add(b) |> Nx.subtract(1.0)

      l =
        Nx.divide(
          Nx.multiply(l, Nx.add(a, Nx.multiply(b, l2))),
          Nx.add(1.0, Nx.multiply(c, l2))
        )

      e = Nx.divide(b, c)

      step =
        if Nx.to_number(Nx.greater(c, 100)) == 1 do
          sqrt_c = Nx.sqrt(c)

          {:qr, Nx.to_number(e), Nx.to_number(sqrt_c),
           Nx.to_number(Nx.divide(Nx.subtract(a, e), sqrt_c))}
        else
          {:cholesky, Nx.to_number(e), Nx.to_number(c), Nx.to_number(Nx.subtract(a, e))}
        end

      l_moving = Nx.to_number(Nx.greater(Nx.abs(Nx.subtract(1.0, l)), 5 * @svd_eps)) == 1
      {{step, l_moving}, l}
    end

    # qdwh_use_qr: with [sqrt(c) U; I] = [Q1; Q2] R,
    # U' = e U + (a - e) / sqrt(c) Q1 Q2^T (e = b / c).
    defp qdwh_step(%T{shape: {b, m, n}, type: type} = u, {:qr, e, sqrt_c, k}, index) do
      eye = Nx.eye({b, n, n}, type: type, backend: {__MODULE__, device: index})
      {q, _r} = Nx.LinAlg.qr(Nx.concatenate([Nx.multiply(sqrt_c, u), eye], axis: 1))
      q1 = Nx.slice(q, [0, 0, 0], [b, m, n])
      q2 = Nx.slice(q, [0, m, 0], [b, n, n])
      product = Nx.dot(q1, [2], [0], q2, [2], [0])
      {Nx.add(Nx.multiply(e, u), Nx.multiply(k, product)), []}
    end

    # qdwh_use_cholesky: with Y Y^T = c U^T U + I,
    # U' = e U + (a - e) Z, Z = U (Y Y^T)^-1 from two triangular solves
    # (Y Zbar = U^T, then Y^T Z^T = Zbar).
    defp qdwh_step(%T{shape: {b, _, n}, type: type} = u, {:cholesky, e, c, a_e}, index) do
      eye = Nx.eye({b, n, n}, type: type, backend: {__MODULE__, device: index})
      y = Nx.LinAlg.cholesky(Nx.add(Nx.multiply(c, gram(u)), eye))
      ut = batch_transpose(u)
      {:ok, zbar, f1} = device_triangular_solve(ut, y, ut, lower: true)
      {:ok, zt, f2} = device_triangular_solve(zbar, y, zbar, lower: true, transform_a: :transpose)
      z = batch_transpose(zt)
      {Nx.add(Nx.multiply(e, u), Nx.multiply(a_e, z)), [f2, f1]}
    end

    # on_true where pred (one value per matrix, axes of size 1 after the
    # batch) is set, else on_false (a select of pred broadcast, a view).
    defp select_matrices(pred, on_true, on_false),
      do: Nx.select(Nx.broadcast(pred, on_false.shape), on_true, on_false)

    # U^T U for a batch {b, m, n}.
    defp gram(u), do: Nx.dot(u, [1], [0], u, [1], [0])

    # The product of each pair of matrices of two batches.
    defp batch_dot(a, b), do: Nx.dot(a, [2], [0], b, [1], [0])

    # The transposes of a batch's matrices (a view).
    defp batch_transpose(t), do: Nx.transpose(t, axes: [0, 2, 1])

    impl_if_callback(:solve, 3)

    # A X = B through the device's LU factorization: X = U^-1 L^-1 P^T B,
    # P^T B as a product and two triangular solves, whose flags are read
    # once both are queued (a singular A raises Nx's "can't solve for
    # singular matrix", unless :singular_check is false). Complex types and
    # devices without the kernels take Nx's default implementation on the
    # host.
    def solve(%T{type: out_type, shape: out_shape} = out, %T{shape: a_shape} = a, %T{} = b) do
      index = device_of_args([a, b])
      compute = linalg_type(out_type)

      if compute != nil and rank_ok?(a) and rank_ok?(b) and linalg?(index, compute) do
        rank = tuple_size(a_shape)
        vector? = tuple_size(b.shape) == rank - 1
        b = if vector?, do: Nx.new_axis(b, -1), else: b
        {p, l, u} = Nx.LinAlg.lu(Nx.as_type(a, out_type))
        batch = Enum.to_list(0..(rank - 3)//1)
        pb = Nx.dot(p, [rank - 2], batch, Nx.as_type(b, out_type), [rank - 2], batch)
        # Both solves queued, then one check of both: the second's flags
        # first, whose download also waits for the first solve.
        {:ok, y, l_flags} = device_triangular_solve(pb, l, pb, lower: true)
        {:ok, x, u_flags} = device_triangular_solve(y, u, y, lower: false)

        if Application.get_env(:nx_vulkan, :singular_check, true),
          do: check_solve_flags(Enum.reject([u_flags, l_flags], &is_nil/1))

        x = if vector?, do: Nx.squeeze(x, axes: [rank - 1]), else: x
        %{x | shape: out_shape, names: out.names}
      else
        host_apply(:solve, [a, b], no_kernel(:solve, out_type, index), fn [ha, hb] ->
          Nx.LinAlg.solve(ha, hb)
        end)
      end
    end

    impl_if_callback(:determinant, 2)

    # The product of U's diagonal from the device's LU factorization, times
    # the sign of P's permutation ((-1) to the number of its inversions):
    # a handful of device ops, where Nx's default implementation traces a
    # defn on every call. Complex types and devices without the kernels
    # take Nx's default implementation on the host.
    def determinant(%T{type: out_type, shape: out_shape} = out, %T{shape: shape} = tensor) do
      index = device_of(tensor)
      compute = linalg_type(out_type)
      rank = tuple_size(shape)
      n = elem(shape, rank - 1)

      cond do
        compute == nil or not rank_ok?(tensor) or not linalg?(index, compute) ->
          host_apply(:determinant, [tensor], no_kernel(:determinant, out_type, index), fn [h] ->
            Nx.LinAlg.determinant(h)
          end)

        n == 0 or Nx.size(out_shape) == 0 ->
          Nx.broadcast(Nx.tensor(1, type: out_type, backend: {__MODULE__, device: index}), out)

        true ->
          {a, scale} = unit_scale(Nx.as_type(tensor, out_type))
          {p, _l, u} = Nx.LinAlg.lu(a)
          d = diagonals(u)
          d = if scale == 1, do: d, else: Nx.multiply(d, scale)
          diagonal = Nx.product(d, axes: [-1])

          perm = Nx.argmax(p, axis: -2)
          upper = Nx.less(Nx.iota({n, 1}), Nx.iota({1, n}))

          inversions =
            Nx.greater(Nx.new_axis(perm, -1), Nx.new_axis(perm, -2))
            |> Nx.logical_and(upper)
            |> Nx.sum(axes: [-2, -1])

          odd = inversions |> Nx.remainder(2) |> Nx.as_type(out_type)
          signed = Nx.multiply(diagonal, Nx.subtract(1, Nx.multiply(2, odd)))
          # A zero product is +0.0, as Nx's own determinant gives it.
          result = Nx.select(Nx.equal(diagonal, 0), 0.0, signed)
          %{result | names: out.names}
      end
    end

    # {a scaled, the factor undoing it}: each f32 or f64 matrix whose
    # largest magnitude is below 1 multiplied by the power of two 2^-k that
    # brings it into [1, 2), and 2^k shaped to multiply the diagonal of its
    # U ({1} per matrix); other matrices and types as they are, factor 1.
    # Scaling by a power of two is exact, so U is the unscaled U times 2^-k
    # bit for bit, except that the LU's flush of entries below `:eps`
    # (1e-10) then acts relative to the matrix's scale: without it every
    # determinant of a matrix of scale 1e-10 or less is 0, and
    # Nx.LinAlg.invert, which checks the determinant first, returns NaN.
    # Matrices of scale 1 or more keep Nx's absolute flush.
    defp unit_scale(%T{type: {:f, bits} = type, shape: shape} = a) when bits in [32, 64] do
      {int, mantissa, bias, min_k} =
        if bits == 64, do: {:s64, 52, 1023, -1021}, else: {:s32, 23, 127, -125}

      rank = tuple_size(shape)
      batch = shape |> Tuple.delete_at(rank - 1) |> Tuple.delete_at(rank - 2)

      # The unbiased exponent of each matrix's largest magnitude (NaN and
      # the infinities: bias + 1; zero and subnormals: -bias), as k <= 0.
      k =
        a
        |> Nx.abs()
        |> Nx.reduce_max(axes: [rank - 2, rank - 1])
        |> Nx.bitcast(int)
        |> Nx.right_shift(mantissa)
        |> Nx.bitwise_and(2 * bias + 1)
        |> Nx.subtract(bias)
        |> Nx.min(0)
        |> Nx.max(min_k)

      power = fn e -> e |> Nx.add(bias) |> Nx.left_shift(mantissa) |> Nx.bitcast(type) end
      up = k |> Nx.negate() |> power.() |> Nx.reshape(Tuple.append(Tuple.append(batch, 1), 1))
      {Nx.multiply(a, up), k |> power.() |> Nx.reshape(Tuple.append(batch, 1))}
    end

    defp unit_scale(a), do: {a, 1}

    impl_if_callback(:triangular_solve, 4)

    # Triangular systems for every system of the batch and every option
    # (lower or upper, either side, A transposed), types as cholesky/2
    # takes them (nxv_triangular_solve picks the kernels).
    # A zero on a diagonal raises Nx's error, which needs the kernel's
    # flags: one small download, so the call waits for the solve. With
    # `config :nx_vulkan, :singular_check, false` it does not wait, and a
    # singular system gives infinities or NaN (as with EXLA).
    def triangular_solve(%T{type: out_type} = out, %T{} = a, %T{} = b, opts) do
      case device_triangular_solve(out, a, b, opts) do
        {:ok, result, nil} ->
          result

        {:ok, result, flags} ->
          if Application.get_env(:nx_vulkan, :singular_check, true),
            do: check_solve_flags([flags])

          result

        :error ->
          index = device_of_args([a, b])

          host(
            :triangular_solve,
            [out, a, b, opts],
            no_kernel(:triangular_solve, out_type, index)
          )
      end
    end

    # triangular_solve/4 on the device: {:ok, result, flags}, flags the
    # kernel's u32 per system as {ref, systems} (nil for an empty result),
    # not yet checked; :error where the device has no kernel for it.
    defp device_triangular_solve(%T{type: out_type} = out, %T{shape: a_shape} = a, b, opts) do
      index = device_of_args([a, b])
      rank = tuple_size(a_shape)
      n = elem(a_shape, rank - 1)
      compute = linalg_type(out_type)
      left = opts[:left_side] != false

      with true <- compute != nil and rank_ok?(a) and rank_ok?(b) and linalg?(index, compute),
           {:ok, ra} <- operand(a, compute, index),
           {:ok, rb} <- operand(b, compute, index) do
        if Nx.size(out) == 0 do
          {:ok, empty(out, index), nil}
        else
          batch = div(Nx.size(a_shape), n * n)
          cols = div(Nx.size(b), batch * n)
          lower = opts[:lower] != false
          transpose = opts[:transform_a] == :transpose

          {x, singular} =
            alloc(index, fn ->
              NIF.triangular_solve(ra, rb, batch, n, cols, lower, left, transpose)
            end)

          {:ok, wrap(out, linalg_result(x, compute, out, index), index), {singular, batch}}
        end
      else
        _ -> :error
      end
    end

    # Raises on the solves' flags, each {ref, systems} (a u32 per system,
    # downloaded in order): bit 0 a zero on the diagonal, bit 1 a chained
    # solve whose wait gave up (its workgroups did not run together:
    # llvmpipe with `chained_solve: :always`).
    defp check_solve_flags(flag_sets) do
      bits =
        for {ref, systems} <- flag_sets,
            <<f::little-unsigned-32 <- download(ref, 0, systems)>>,
            reduce: 0,
            do: (acc -> Bitwise.bor(acc, f))

      cond do
        Bitwise.band(bits, 2) != 0 ->
          raise RuntimeError,
                "triangular_solve: the device did not run the solve's workgroups together " <>
                  "(a wait gave up); open the device with chained_solve: :never"

        Bitwise.band(bits, 1) != 0 ->
          raise ArgumentError, "can't solve for singular matrix"

        true ->
          :ok
      end
    end

    # The diagonals of a batch of n x n matrices (the last two axes): every
    # (n + 1)-th element of each flattened matrix, a strided slice
    # (Nx.take_diagonal builds its indices on the host).
    defp diagonals(%T{shape: shape} = t) do
      rank = tuple_size(shape)
      n = elem(shape, rank - 1)

      t
      |> Nx.reshape(put_elem(Tuple.delete_at(shape, rank - 1), rank - 2, n * n))
      |> Nx.slice_along_axis(0, n * n, axis: -1, strides: n + 1)
    end

    # The kernels' type for a result of type out_type: f64 for f64, f32 for
    # the other real float types; nil for complex types.
    defp linalg_type({:f, 64}), do: :f64
    defp linalg_type({:c, _}), do: nil
    defp linalg_type(_), do: :f32

    defp linalg?(index, nif_type), do: supported?(index, :linalg, :any, nif_type)

    # The kernel's result in out's type (f16 and bf16 converted from f32).
    defp linalg_result(ref, compute, %T{type: type} = out, index) do
      case Map.fetch!(@nif_types, type) do
        ^compute -> ref
        nif_type -> alloc(index, fn -> NIF.convert(nif_type, [Nx.size(out)], ref, 0, nil) end)
      end
    end

    impl_if_callback(:stack, 3)

    # Stacking is concatenating tensors with a new size-1 axis (a reshape,
    # free for device tensors).
    def stack(out, tensors, axis) do
      tensors =
        Enum.map(tensors, fn %T{shape: shape, names: names} = t ->
          %{t | shape: Tuple.insert_at(shape, axis, 1), names: List.insert_at(names, axis, nil)}
        end)

      concatenate(out, tensors, axis)
    end

    impl_if_callback(:optional, 3)

    # These default implementations are built from ops with kernels and
    # run on the device (logical_not: equal with zero; the cumulative ops:
    # an associative scan of slices and element-wise ops; all_close:
    # element-wise ops and all; top_k: argsort and take_along_axis;
    # fft2/ifft2: fft/ifft along each axis); the others run on the host in
    # one piece.
    @device_defaults [:logical_not, :cumulative_sum, :cumulative_product] ++
                       [:cumulative_min, :cumulative_max, :all_close, :top_k, :fft2, :ifft2]

    def optional(name, args, fun) when name in @device_defaults, do: apply(fun, args)

    def optional(name, args, fun) do
      host_apply(name, args, "default implementation of an optional callback", fn host_args ->
        apply(fun, host_args)
      end)
    end

    impl_if_callback(:block, 4)

    def block(struct, output, args, fun) when is_struct(struct) do
      reason = "default implementation of #{inspect(struct.__struct__)}"

      host_apply(block_name(struct), args, reason, fn host_args ->
        if function_exported?(Nx.BinaryBackend, :block, 4) do
          apply(Nx.BinaryBackend, :block, [struct, output, host_args, fun])
        else
          apply(fun, [struct | host_args])
        end
      end)
    end

    defp block_name(%module{}) do
      module |> Module.split() |> List.last() |> Macro.underscore() |> String.to_atom()
    end

    # Every other required callback of the compiled-against Nx (a newer Nx
    # may declare more) is computed on the host as well.
    for {op, arity} <- Nx.Backend.behaviour_info(:callbacks),
        not Module.defines?(__MODULE__, {op, arity}),
        {op, arity} not in Nx.Backend.behaviour_info(:optional_callbacks),
        function_exported?(Nx.BinaryBackend, op, arity) do
      args = Macro.generate_arguments(arity, __MODULE__)
      @impl true
      def unquote(op)(unquote_splicing(args)), do: host(unquote(op), unquote(args), "no kernel")
    end

    ## Host fallback

    # Computes callback `op` on Nx.BinaryBackend. args is the callback's
    # argument list, the output template first; tensor arguments are
    # downloaded and the result is uploaded to the device of the inputs.
    defp host(op, [out | args], reason) do
      Fallback.record!(op, reason)
      index = device_of_args(args)
      host_args = Enum.map(args, &to_host/1)

      result =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          apply(Nx.BinaryBackend, op, [host_out(out) | host_args])
        end)

      to_device(result, index)
    end

    # A creation callback (no tensor arguments) computed on the host.
    defp host_create(op, out, args, index, reason) do
      Fallback.record!(op, reason)

      result =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          apply(Nx.BinaryBackend, op, [host_out(out) | args] ++ [[]])
        end)

      to_device(result, index)
    end

    # Runs fun (a default implementation) on host copies of args.
    defp host_apply(name, args, reason, fun) do
      Fallback.record!(name, reason)
      index = device_of_args(args)
      host_args = Enum.map(args, &to_host/1)

      result =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          host_args |> fun.() |> result_to_host()
        end)

      to_device(result, index)
    end

    defp host_out(%T{} = out), do: %{out | data: nil}

    defp host_out(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&host_out/1) |> List.to_tuple()

    defp host_out(other), do: other

    defp to_host(%T{data: %__MODULE__{}} = t) do
      Nx.BinaryBackend.from_binary(%{t | data: nil}, read_all(t), [])
    end

    defp to_host(%T{data: %Nx.BinaryBackend{}} = t), do: t
    defp to_host(%T{} = t), do: Nx.backend_copy(t, Nx.BinaryBackend)
    defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)

    defp to_host(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&to_host/1) |> List.to_tuple()

    defp to_host(fun) when is_function(fun, 1), do: fn a -> result_to_host(fun.(a)) end
    defp to_host(fun) when is_function(fun, 2), do: fn a, b -> result_to_host(fun.(a, b)) end

    defp to_host(fun) when is_function(fun, 3),
      do: fn a, b, c -> result_to_host(fun.(a, b, c)) end

    defp to_host(other), do: other

    # Results of functions evaluated on the host: device tensors they
    # produced (from tensors they captured) come to the host too, as
    # Nx.BinaryBackend expects.
    defp result_to_host(%T{data: %__MODULE__{}} = t), do: to_host(t)

    defp result_to_host(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&result_to_host/1) |> List.to_tuple()

    defp result_to_host(other), do: other

    defp to_device(%T{data: %__MODULE__{device: index}} = t, index), do: t

    defp to_device(%T{data: %__MODULE__{}} = t, index),
      do: from_binary(t, read_all(t), device: index)

    defp to_device(%T{} = t, index), do: from_binary(t, Nx.to_binary(t), device: index)

    defp to_device(tuple, index) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&to_device(&1, index)) |> List.to_tuple()

    defp to_device(list, index) when is_list(list), do: Enum.map(list, &to_device(&1, index))
    defp to_device(%Stream{} = stream, index), do: Stream.map(stream, &to_device(&1, index))
    defp to_device(other, _index), do: other

    ## Operands

    # A dense tensor of nif_type on device index holding the elements of t
    # (in t's shape): {:ok, ref}, or :error when that needs a kernel the
    # device lacks. Tensors of known value become a fill of the converted
    # value; tensors of other backends or devices are converted on the host
    # (they are there already) and uploaded.
    defp operand(%T{type: type} = t, nif_type, index) do
      target = nif_type_to_nx(nif_type)

      case t do
        %T{data: %__MODULE__{ref: nil, value: value}} ->
          # A constant without a buffer: a new handle on the cached one.
          {:ok, fill(index, nif_type, 1, convert_value(value, type, target))}

        %T{data: %__MODULE__{device: ^index, ref: ref, strides: strides}} when strides != nil ->
          # A view: read in its order into a dense buffer, converted in the
          # same pass.
          cond do
            type == target ->
              {:ok, materialize(t)}

            convertible?(index, type) and convert_type?(index, nif_type) ->
              {:ok, alloc(index, fn -> NIF.convert(nif_type, view_dims(t), ref, 0, strides) end)}

            true ->
              :error
          end

        %T{type: ^target, data: %__MODULE__{device: ^index, ref: ref}} ->
          {:ok, ref}

        %T{data: %__MODULE__{ref: ref, value: value}} when value != nil ->
          # Raises on a deallocated tensor, like every other use.
          _ = NIF.tensor_info(ref)
          {:ok, fill(index, nif_type, Nx.size(t), convert_value(value, type, target))}

        %T{data: %__MODULE__{device: ^index, ref: ref}} ->
          if convertible?(index, type) and convert_type?(index, nif_type),
            do: {:ok, alloc(index, fn -> NIF.convert(nif_type, dims(t), ref, 0, nil) end)},
            else: :error

        %T{data: %__MODULE__{}} ->
          operand(to_host(t), nif_type, index)

        %T{data: %Nx.BinaryBackend{}, shape: shape} when tuple_size(shape) == 0 ->
          value = Nx.to_number(t)
          {:ok, fill(index, nif_type, 1, convert_value(value, type, target))}

        %T{} ->
          host_t = Nx.backend_copy(t, Nx.BinaryBackend)
          converted = Nx.BinaryBackend.as_type(%{host_t | type: target}, host_t)
          {:ok, upload(index, nif_type, Nx.BinaryBackend.to_binary(converted, Nx.size(t)))}
      end
    end

    # operand/3 for an operand of the binary and compare kernels, which
    # accept an immediate: one element's bytes (at most 8) in place of a
    # tensor, carried in the kernel's push constants. A host scalar (the
    # tensor Nx makes of a number outside this backend) is one, with no NIF
    # call and no buffer.
    defp kernel_operand(
           %T{data: %Nx.BinaryBackend{state: bytes}, type: type, shape: {}} = t,
           nif_type,
           index
         ) do
      target = nif_type_to_nx(nif_type)
      bytes = if type == target, do: bytes, else: convert_value(Nx.to_number(t), type, target)

      if byte_size(bytes) <= 8,
        do: {:ok, bytes},
        else: operand(t, nif_type, index)
    end

    # A constant without a buffer (the s64 constant Nx makes of the 1 in
    # Nx.add(x, 1)), in any type: its converted value as an immediate, or
    # (c128) a one-element buffer.
    defp kernel_operand(
           %T{type: type, data: %__MODULE__{ref: nil, value: value}},
           nif_type,
           index
         ),
         do: value_operand(value, type, nif_type, index)

    # A single element of known value in another type (an uploaded one):
    # the converted value's cached buffer, through the cache's own handle.
    defp kernel_operand(
           %T{type: type, data: %__MODULE__{device: index, ref: ref, value: value}} = t,
           nif_type,
           index
         )
         when value != nil do
      target = nif_type_to_nx(nif_type)

      with true <- type != target and Nx.size(t) == 1,
           bytes when byte_size(bytes) <= 8 <- convert_value(value, type, target) do
        # Raises on a deallocated tensor, like every other use.
        _ = NIF.tensor_info(ref)
        {:ok, shared_scalar(index, nif_type, bytes)}
      else
        _ -> operand(t, nif_type, index)
      end
    end

    defp kernel_operand(t, nif_type, index), do: operand(t, nif_type, index)

    # operand/3 for an input that a kernel without immediates only reads
    # (select's values, the predicate it compares with zero): a number is
    # the cached buffer of its value through the cache's own handle, with
    # no new handle (no NIF call); the operand never becomes part of a
    # result, so nothing can deallocate it.
    defp read_operand(t, nif_type, index) do
      case kernel_operand(t, nif_type, index) do
        {:ok, bytes} when is_binary(bytes) -> {:ok, shared_scalar(index, nif_type, bytes)}
        other -> other
      end
    end

    # The value every element of t is known to equal, or nil. Host scalars
    # are read (they are on the host already).
    defp known_value(%T{data: %__MODULE__{value: value}}), do: value

    defp known_value(%T{data: %Nx.BinaryBackend{}, shape: shape} = t) do
      if Nx.size(shape) == 1, do: Nx.to_number(t)
    end

    defp known_value(_), do: nil

    # t's known value after as_type to type, or nil.
    defp converted_value(%T{type: from} = t, to) do
      case known_value(t) do
        nil ->
          nil

        value ->
          %T{shape: {}, type: to, names: []}
          |> Nx.BinaryBackend.from_binary(convert_value(value, from, to), [])
          |> Nx.to_number()
      end
    end

    # The bytes of one element of type `to` equal to `value` of type
    # `from` converted with Nx's as_type semantics.
    defp convert_value(value, type, type), do: scalar_bytes(type, value)

    # Fast paths: real numbers to f32/f64 round; integers to s32 wrap;
    # finite floats to s32 truncate then wrap (as Nx.BinaryBackend does).
    defp convert_value(value, {kind, _}, {:f, size} = to)
         when kind in [:s, :u, :f, :bf] and is_number(value) and size in [32, 64] and
                (size == 64 or abs(value) <= @f32_max),
         do: scalar_bytes(to, value)

    defp convert_value(value, _from, {:s, 32}) when is_integer(value),
      do: <<value::signed-32-native>>

    defp convert_value(value, _from, {:s, 32}) when is_float(value),
      do: <<trunc(value)::signed-32-native>>

    defp convert_value(value, from, to) do
      host = Nx.BinaryBackend.constant(%T{shape: {}, type: from, names: []}, value, [])

      %T{shape: {}, type: to, names: []}
      |> Nx.BinaryBackend.as_type(host)
      |> Nx.BinaryBackend.to_binary(1)
    end

    # The value of a single-element binary of type, or nil (finite floats
    # and the wide integers decode directly).
    defp single_value({:f, 32}, <<x::float-32-native>>), do: x
    defp single_value({:f, 64}, <<x::float-64-native>>), do: x
    defp single_value({:s, 32}, <<x::signed-32-native>>), do: x
    defp single_value({:s, 64}, <<x::signed-64-native>>), do: x

    defp single_value(type, binary) do
      {_, bits} = type

      if bit_size(binary) == bits do
        %T{shape: {}, type: type, names: []}
        |> Nx.BinaryBackend.from_binary(binary, [])
        |> Nx.to_number()
      end
    end

    ## Devices and types

    defp device_of(%T{data: %__MODULE__{device: index}}), do: index
    defp device_of(_), do: Nx.Vulkan.default_device_index()

    # The device of the first Vulkan tensor among args (searched in lists
    # and tuples), else the default device.
    defp device_of_args(args) do
      case find_device(args) do
        nil -> Nx.Vulkan.default_device_index()
        index -> index
      end
    end

    defp find_device(%T{data: %__MODULE__{device: index}}), do: index
    defp find_device(list) when is_list(list), do: Enum.find_value(list, &find_device/1)
    defp find_device(tuple) when is_tuple(tuple), do: find_device(Tuple.to_list(tuple))
    defp find_device(_), do: nil

    defp nif_type!(type, op, index) do
      case Map.fetch(@nif_types, type) do
        {:ok, nif_type} ->
          nif_type

        :error ->
          raise ArgumentError,
                "Nx.Vulkan.Backend: type #{type_name(type)} is not supported by #{op} on " <>
                  "Vulkan device #{index}: it cannot be stored on the device (types: " <>
                  Enum.map_join(Enum.sort(Map.values(@nif_types)), ", ", &Atom.to_string/1) <>
                  ")"
      end
    end

    for {nx, nif} <- @nif_types do
      defp nif_type_to_nx(unquote(nif)), do: unquote(Macro.escape(nx))
    end

    defp type_name(type) do
      Nx.Type.to_string(type)
    rescue
      _ -> inspect(type)
    end

    defp integer_type?({kind, _}), do: kind in [:s, :u]

    defp no_kernel(op, {from, to}, index) when is_tuple(from) do
      "no #{op} kernel from #{type_name(from)} to #{type_name(to)} on Vulkan device #{index}"
    end

    defp no_kernel(op, type, index),
      do: "no #{op} kernel for #{type_name(type)} on Vulkan device #{index}"

    # Types the device computes on (reduce, matmul, iota): every real type
    # the device can store (f64 needs shaderFloat64, 8- and 16-bit types
    # their storage features).
    defp compute_type?(index, nif_type), do: supported?(index, :convert, :copy, nif_type)

    # compute_type? for the kernels of ordered (real) types only: sort,
    # argmax/argmin, max/min reductions and windows.
    defp real_compute_type?(index, nif_type),
      do: nif_type not in [:c64, :c128] and compute_type?(index, nif_type)

    defp real?({:c, _}), do: false
    defp real?(_), do: true

    # Types the device converts between (as_type, operands).
    defp convert_type?(index, nif_type), do: supported?(index, :convert, :copy, nif_type)

    # Types with a strided copy kernel.
    defp copy_type?(index, nif_type), do: supported?(index, :unary, :copy, nif_type)

    # A device tensor of this Nx type can be converted on the device.
    defp convertible?(index, type) do
      case Map.fetch(@nif_types, type) do
        {:ok, nif_type} -> convert_type?(index, nif_type)
        :error -> false
      end
    end

    defp supported?(index, kind, op, nif_type) do
      key = {__MODULE__, :supported, index, kind, op, nif_type}

      with nil <- :persistent_term.get(key, nil),
           do: remember(key, NIF.supported(Nx.Vulkan.device(index), kind, op, nif_type) == true)
    end

    # Stores value (not nil) under key in :persistent_term; returns it.
    defp remember(key, value) do
      :persistent_term.put(key, value)
      value
    end

    # supported?(index, :binary, op, nif_type) for out's Nx type, in one
    # lookup (the hot paths of binary ops on dense tensors): false for a
    # type the device cannot store.
    defp binary_kernel?(index, op, type) do
      key = {__MODULE__, :binary_kernel, index, op, type}

      case :persistent_term.get(key, nil) do
        nil ->
          value =
            case Map.fetch(@nif_types, type) do
              {:ok, nif_type} -> supported?(index, :binary, op, nif_type)
              :error -> false
            end

          :persistent_term.put(key, value)
          value

        value ->
          value
      end
    end

    defp rank_ok?(%T{shape: shape}), do: tuple_size(shape) <= @max_rank

    ## Buffers

    # A dense buffer of t on device index: its own, a view's elements copied
    # in order, or t uploaded (in its own type) when it lives on the host or
    # another device.
    defp device_ref!(%T{data: %__MODULE__{device: index, ref: ref, strides: nil}}, index)
         when ref != nil,
         do: ref

    defp device_ref!(%T{type: type} = t, index) do
      {:ok, ref} = operand(t, nif_type!(type, :copy, index), index)
      ref
    end

    # The buffer t's elements are read from with layout_strides(t) (a
    # view's own buffer), uploading t when it lives on the host or another
    # device.
    defp buffer_ref!(%T{data: %__MODULE__{device: index, ref: ref}}, index) when ref != nil,
      do: ref

    defp buffer_ref!(t, index), do: device_ref!(t, index)

    # The element strides t's buffer is read with, vectorized axes first:
    # a view's, or row-major.
    defp layout_strides(%T{data: %__MODULE__{strides: strides}}) when strides != nil, do: strides
    defp layout_strides(%T{} = t), do: dense_strides(view_dims(t))

    # The axes of t's buffer: vectorized axes, then the shape's.
    defp view_dims(%T{shape: shape, vectorized_axes: []}), do: Tuple.to_list(shape)

    defp view_dims(%T{shape: shape, vectorized_axes: vectorized}),
      do: Keyword.values(vectorized) ++ Tuple.to_list(shape)

    # Whether out (a transpose or broadcast of tensor) can view tensor's
    # buffer: a device tensor of unknown value, of a type the device
    # copies, out within the runtime's rank.
    defp viewable?(%T{type: type, data: %__MODULE__{device: index, ref: ref, value: nil}}, out)
         when ref != nil,
         do: copy_type?(index, nif_type!(type, :copy, index)) and rank_ok?(out)

    defp viewable?(_tensor, _out), do: false

    # out as a view of tensor's buffer with strides (nil where they are
    # row-major for out's shape). Raises, like every other use, when the
    # tensor was deallocated.
    defp view(out, %T{data: %__MODULE__{ref: ref} = data}, strides) do
      NIF.tensor_info(ref)
      strides = if dense_layout?(dims(out), strides), do: nil, else: strides
      %{out | data: %{data | strides: strides}}
    end

    # Whether strides read dims row-major (axes of one element aside).
    defp dense_layout?(dims, strides) do
      dims
      |> Enum.zip(Enum.zip(strides, dense_strides(dims)))
      |> Enum.all?(fn {dim, {s, d}} -> dim == 1 or s == d end)
    end

    # A new dense buffer holding view t's elements in order.
    defp materialize(%T{data: %__MODULE__{device: index, ref: ref, strides: strides}} = t) do
      dims = view_dims(t)

      if Enum.member?(dims, 0),
        do: empty_ref(t, index),
        else: strided_read(index, dims, ref, 0, strides)
    end

    defp empty_ref(%T{type: type}, index), do: upload(index, nif_type!(type, :copy, index), "")

    # The operand {:ok, ref, strides} of a kernel reading t broadcast to
    # out_shape when t is a view of nif_type on device index: its own
    # buffer, read in place; nil otherwise.
    defp view_operand(
           %T{type: type, data: %__MODULE__{device: index, ref: ref, strides: strides}} = t,
           nif_type,
           index,
           out_shape
         )
         when strides != nil do
      if type == nif_type_to_nx(nif_type),
        do: {:ok, ref, broadcast_strides(t.shape, out_shape, strides)}
    end

    defp view_operand(_t, _nif_type, _index, _out_shape), do: nil

    # {:ok, x, strides}: what reader (operand/3, kernel_operand/3 or
    # read_operand/3) gives for t, with the strides reading it broadcast to
    # out_shape (those of a buffer, were x an immediate); a view of nif_type
    # is read in place instead.
    defp strided_operand(reader, t, nif_type, index, out_shape) do
      with nil <- view_operand(t, nif_type, index, out_shape),
           {:ok, x} <- reader.(t, nif_type, index) do
        {:ok, x, broadcast_strides(t.shape, out_shape)}
      end
    end

    # out viewing tensor's buffer (a free op). Raises, like every other use,
    # when the tensor was deallocated. A view keeps its layout where out
    # has its shape; otherwise (a reshape) its elements are copied in order
    # into a dense buffer first.
    defp same_data(%T{shape: shape} = out, %T{shape: shape, data: %__MODULE__{ref: ref} = data}) do
      if ref != nil, do: NIF.tensor_info(ref)
      %{out | data: data}
    end

    defp same_data(out, %T{data: %__MODULE__{strides: strides, device: index}} = tensor)
         when strides != nil do
      if constant_view?(tensor),
        do: strided_copy(:reshape, out, tensor, 0, [], [out, tensor]),
        else: wrap(out, materialize(tensor), index)
    end

    defp same_data(out, %T{data: %__MODULE__{ref: ref} = data}) do
      if ref != nil, do: NIF.tensor_info(ref)
      %{out | data: data}
    end

    defp wrap(%T{} = out, ref, index, value \\ nil),
      do: %{out | data: %__MODULE__{ref: ref, device: index, value: value}}

    # out (one element of out's type, whose bytes are bytes) as a constant
    # without a buffer.
    defp constant_of(%T{type: type} = out, index, bytes),
      do: %{out | data: %__MODULE__{ref: nil, device: index, value: single_value(type, bytes)}}

    # out, every element of which is bytes (one element of out's type), as
    # a view of the cached one-element buffer (Nx.Vulkan.Scalars) with
    # stride 0 along every axis: no device op fills it. Kernels that read
    # strided operands read it in place, binary ops and comparisons take its
    # value as an immediate, to_binary/2 repeats the value on the host, and
    # every other use copies it into a dense buffer first (what a fill would
    # have cost). nil when out is not a plain tensor within the runtime's
    # rank or its elements are wider than 8 bytes.
    defp constant_view(
           %T{type: type, shape: shape, vectorized_axes: []} = out,
           index,
           nif_type,
           bytes
         )
         when tuple_size(shape) <= @max_rank and byte_size(bytes) <= 8 do
      if compute_type?(index, nif_type) do
        {ref, _} = scalar(index, nif_type, bytes)
        strides = List.duplicate(0, tuple_size(shape))

        %{
          out
          | data: %__MODULE__{
              ref: ref,
              device: index,
              value: single_value(type, bytes),
              strides: strides
            }
        }
      end
    end

    defp constant_view(_out, _index, _nif_type, _bytes), do: nil

    # Whether t is a constant_view/4: a view of known value.
    defp constant_view?(%T{data: %__MODULE__{value: value, strides: [_ | _]}}), do: value != nil
    defp constant_view?(_t), do: false

    defp empty(%T{type: type} = out, index) do
      wrap(out, upload(index, nif_type!(type, :empty, index), ""), index)
    end

    defp dims(%T{shape: shape}), do: Tuple.to_list(shape)

    # Elements of the buffer, vectorized axes included.
    defp flat_size(%T{shape: shape, vectorized_axes: vectorized_axes}) do
      Enum.reduce(vectorized_axes, Nx.size(shape), fn {_, size}, acc -> acc * size end)
    end

    defp read_all(%T{} = t), do: to_binary(t, flat_size(t))

    defp upload(index, nif_type, binary) when byte_size(binary) > @dirty_upload_bytes,
      do: alloc(index, fn -> NIF.upload_dirty(Nx.Vulkan.device(index), nif_type, binary) end)

    defp upload(index, nif_type, binary),
      do: alloc(index, fn -> NIF.upload(Nx.Vulkan.device(index), nif_type, binary) end)

    defp download(ref, _offset, count) when count <= 0 do
      # Still raises on a deallocated tensor.
      _ = NIF.tensor_info(ref)
      ""
    end

    defp download(ref, offset, count), do: NIF.download(ref, offset, count)

    # {a new handle on the cached one-element buffer, its value}.
    defp scalar(index, nif_type, bytes),
      do: Nx.Vulkan.Scalars.fetch(index, nif_type, bytes, scalar_fill(index, nif_type, bytes))

    # The cached one-element buffer's own handle (see kernel_operand/3).
    defp shared_scalar(index, nif_type, bytes) do
      make = scalar_fill(index, nif_type, bytes)
      Nx.Vulkan.Scalars.fetch_shared(index, nif_type, bytes, make)
    end

    # Fills a cache miss: {ref, value} of a new one-element buffer.
    defp scalar_fill(index, nif_type, bytes) do
      fn ->
        ref = alloc(index, fn -> NIF.fill(Nx.Vulkan.device(index), nif_type, 1, bytes) end)
        {ref, single_value(nif_type_to_nx(nif_type), bytes)}
      end
    end

    # count elements equal to one element's bytes: a device fill, or an
    # upload for elements of more than 8 bytes (c128). A single element is
    # a new handle on a cached scalar buffer (see Nx.Vulkan.Scalars): the
    # scalars Nx makes from numbers cost no device work once cached.
    defp fill(index, nif_type, 1, bytes) when byte_size(bytes) <= 8,
      do: index |> scalar(nif_type, bytes) |> elem(0)

    defp fill(index, nif_type, count, bytes) when byte_size(bytes) <= 8,
      do: alloc(index, fn -> NIF.fill(Nx.Vulkan.device(index), nif_type, count, bytes) end)

    defp fill(index, nif_type, count, bytes),
      do: upload(index, nif_type, :binary.copy(bytes, count))

    # A strided read of a view into a new dense tensor of shape.
    defp strided_read(index, shape, ref, offset, strides),
      do: alloc(index, fn -> NIF.unary(:copy, shape, ref, offset, strides) end)

    # alloc/2 for Nx.Vulkan.Compiler's replays.
    @doc false
    def __alloc__(index, fun), do: alloc(index || Nx.Vulkan.default_device_index(), fun)

    # Runs an allocating NIF call, recovering from a full pool by
    # collecting garbage and trimming (Nx.Vulkan.Memory).
    defp alloc(index, fun), do: Nx.Vulkan.Memory.alloc(index, fun)

    # Row-major element strides of dims.
    defp dense_strides(dims) do
      {strides, _} =
        List.foldr(dims, {[], 1}, fn dim, {acc, stride} -> {[stride | acc], stride * dim} end)

      strides
    end

    # Strides reading a dense tensor of in_shape broadcast to out_shape
    # (trailing axes aligned); nil when the shapes are equal.
    defp broadcast_strides(shape, shape), do: nil
    defp broadcast_strides({}, out_shape), do: List.duplicate(0, tuple_size(out_shape))

    defp broadcast_strides(in_shape, out_shape),
      do: broadcast_strides(in_shape, out_shape, dense_strides(Tuple.to_list(in_shape)))

    # The same for a buffer read with in_strides (a view's); never nil.
    defp broadcast_strides(in_shape, out_shape, in_strides) do
      in_dims = Tuple.to_list(in_shape)
      out_dims = Tuple.to_list(out_shape)
      lead = length(out_dims) - length(in_dims)

      List.duplicate(0, lead) ++ kept_strides(in_dims, in_strides, Enum.drop(out_dims, lead))
    end

    # The dense stride of each input axis the output keeps (same extent,
    # not 1), 0 for the axes it broadcasts.
    defp kept_strides([dim | dims], [stride | strides], [dim | out_dims]) when dim != 1,
      do: [stride | kept_strides(dims, strides, out_dims)]

    defp kept_strides([_ | dims], [_ | strides], [_ | out_dims]),
      do: [0 | kept_strides(dims, strides, out_dims)]

    defp kept_strides([], [], []), do: []

    # The native-endian bytes of one element of type equal to number.
    defp scalar_bytes({:f, 32}, x) when is_number(x) and abs(x) <= @f32_max,
      do: <<x::float-32-native>>

    defp scalar_bytes({:f, 64}, x) when is_number(x), do: <<x::float-64-native>>
    defp scalar_bytes({:s, 32}, x) when is_integer(x), do: <<x::signed-32-native>>
    defp scalar_bytes({:s, 64}, x) when is_integer(x), do: <<x::signed-64-native>>

    defp scalar_bytes(type, number) do
      %T{shape: {}, type: type, names: []}
      |> Nx.BinaryBackend.constant(number, [])
      |> Nx.BinaryBackend.to_binary(1)
    end
  end
end
