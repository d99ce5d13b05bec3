defmodule Nx.Vulkan.NIF do
  @moduledoc """
  The native interface of the runtime (`nif/nxv_nif.c`). Internal: use
  `Nx.Vulkan` and `Nx.Vulkan.Backend`.

  Conventions:

    * `device` is a device resource from `open_device/2`; `tensor` a tensor
      resource. A tensor keeps its device alive.
    * Types are atoms: `:s8 :s16 :s32 :s64 :u8 :u16 :u32 :u64 :f16 :bf16
      :f32 :f64 :c64 :c128`.
    * Shapes, strides and axes are lists of integers; strides and offsets
      count elements. `nil` strides mean the dense row-major strides of the
      shape (the tensor must then hold exactly the shape's elements).
    * Op NIFs return a new tensor resource at once (the work is queued).
      Only `download/3`, `synchronize/1` and large uploads wait; they run
      on dirty schedulers.
    * Bad arguments raise `ArgumentError` naming the problem; a failed or
      lost device raises `Nx.Vulkan.Error` (fields `:status`, `:message`);
      an op or type the device cannot compute raises `ArgumentError` naming
      type, op and device. A deallocated tensor raises `ArgumentError`.

  The library loaded is `priv/libnx_vulkan_nif.so`, or the one the
  environment variable `NX_VULKAN_NIF` names when it is set: its path
  without the `.so` extension, read when the module loads (the fuzz test
  loads the sanitizer build, `build/asan/libnx_vulkan_nif`, this way).
  """

  @on_load :load_nif
  @doc false
  def load_nif do
    path =
      case System.get_env("NX_VULKAN_NIF") do
        nil -> :filename.join(:code.priv_dir(:nx_vulkan), ~c"libnx_vulkan_nif")
        "" -> :filename.join(:code.priv_dir(:nx_vulkan), ~c"libnx_vulkan_nif")
        path -> String.to_charlist(path)
      end

    :erlang.load_nif(path, 0)
  end

  defp nif_error, do: :erlang.nif_error(:nif_not_loaded)

  # Devices

  @doc "Number of Vulkan physical devices."
  def device_count, do: nif_error()

  @doc "Index the default choice picks (`NX_VULKAN_DEVICE`, else discrete > integrated > virtual > CPU)."
  def default_device_index, do: nif_error()
  @doc "Map describing physical device `index` (name, type, features, limits) without opening it."
  def device_info(_index), do: nif_error()

  @doc """
  Opens device `index` (-1 for the default). `opts` is a map with optional
  keys `:max_batch_nodes, :idle_flush_us, :kick_nodes, :kick_inflight, :early_inflight, :wait_spin_us, :idle_spin_us, :ring_capacity,
  :staging_bytes, :arena_bytes, :pool_limit_bytes, :pool_chunk_bytes, :cache_dir (binary),
  :disable_disk_cache, :poison_outputs, :fast_math, :unmapped_small,
  :no_latency_timing, :no_gpu_timestamps, :no_round_trip_submit, :defer_elementwise,
  :no_spirv_prune`,
  `:download_kernel` and `:chained_solve` (`:auto`,
  `:always` or `:never`), `:reorder_window` (0..64, 0 the default, or
  `:off`), `:pipeline_threads` (1..64, `:auto` for half the CPUs, or
  `:off`/0; unset, `NX_VULKAN_PIPELINE_THREADS` decides, else none),
  `:batch_timeout_ms` (a batch still running that
  long after it became the oldest in flight fails the device with
  `:device_lost`; 0, the default, never). Each call opens a new context.
  """
  def open_device(_index, _opts), do: nif_error()
  @doc "Counters of a device as a map (pool, queue, pipeline cache)."
  def device_stats(_device), do: nif_error()
  @doc "Starts (`true`) or stops keeping a record of each retired batch. `:ok`."
  def record_batches(_device, _on), do: nif_error()

  @doc """
  Takes up to 256 of the oldest batch records: `{[{ops, bytes,
  queue_wait_ns, gpu_ns, latency_ns, record_time_ns, submit_time_ns,
  gpu_start_time_ns, gpu_end_time_ns}], dropped}`, `dropped` the batches not recorded since
  the previous call because the backlog was full. The `_time_ns` fields are
  times on `clock_ns/0`'s clock (the GPU's two 0 where its timestamps
  cannot be calibrated against it).
  """
  def take_batches(_device), do: nif_error()

  @doc "The runtime's monotonic clock (CLOCK_MONOTONIC) in nanoseconds: the clock of batch records."
  def clock_ns, do: nif_error()
  @doc "Waits (dirty scheduler) until all queued work is done. `:ok` or raises."
  def synchronize(_device), do: nif_error()
  @doc "`:ok` or `{status_atom, message}` (the sticky error)."
  def device_status(_device), do: nif_error()
  @doc "Frees unused pool memory. `:ok`."
  def trim(_device), do: nif_error()
  @doc "Writes the pipeline cache file now. `:ok` or raises."
  def save_pipeline_cache(_device), do: nif_error()

  @doc """
  Test hook: the next submission fails with `:device_lost` or
  `:submit_failed`, or (`:pipeline_failed`) the next pipeline creation
  fails as if the driver were out of device memory, or (`:hang`) the next
  submission does not run until the device is released, as if the GPU had
  stopped making progress.
  """
  def inject_fault(_device, _fault), do: nif_error()

  @doc """
  True when the device has a kernel: `kind` is `:binary`, `:unary` or
  `:compare` (with the op), `:select`, `:convert` or `:linalg` (Cholesky
  and triangular solves; op ignored; `type` is the operand type).
  """
  def supported(_device, _kind, _op, _type), do: nif_error()

  # Tensors

  @doc "New tensor of `type` holding the bytes of `binary` (its size must be a multiple of the element size)."
  def upload(_device, _type, _binary), do: nif_error()
  @doc "Same as upload/3, on a dirty scheduler (for large binaries)."
  def upload_dirty(_device, _type, _binary), do: nif_error()
  @doc "Binary of elements `[offset, offset + count)`; waits on a dirty scheduler."
  def download(_tensor, _offset, _count), do: nif_error()
  @doc "Frees the tensor's buffer: `:ok`, or `:already_deallocated` the second time."
  def deallocate(_tensor), do: nif_error()

  @doc """
  `deallocate/1` of each tensor of the list: `:ok`. A list holding anything
  but tensors raises `ArgumentError` and deallocates none of them.
  """
  def deallocate_many(_tensors), do: nif_error()
  @doc "`{type, count}`, or raises if deallocated."
  def tensor_info(_tensor), do: nif_error()
  @doc "Device-side copy of a tensor."
  def copy(_tensor), do: nif_error()

  @doc "A tensor sharing `tensor`'s buffer, its elements read as `type` (same element size): a bitcast."
  def reinterpret(_tensor, _type), do: nif_error()

  @doc "New tensor of `count` elements of `type`, contents undefined (to be written with `copy_into/7`)."
  def empty(_device, _type, _count), do: nif_error()

  @doc """
  Writes the view `(src, src_offset, src_strides)` over `shape`, converted to
  dst's type, into `dst` at `dst_offset` with `dst_strides`. Modifies `dst`:
  only for a tensor the caller has just created and not shared. `:ok`.
  """
  def copy_into(_dst, _dst_offset, _dst_strides, _shape, _src, _src_offset, _src_strides),
    do: nif_error()

  # Ops (all queue work and return a new dense tensor)

  @doc """
  `out[i] = a[i] op b[i]` over `shape`; `op` in `:add :subtract :multiply
  :divide :max :min :pow :remainder :quotient :atan2 :bitwise_and
  :bitwise_or :bitwise_xor :left_shift :right_shift`. a and b share a type.
  Either operand may instead be a binary of one element of the other's
  type (at most 8 bytes), with offset 0 and strides nil: an immediate
  scalar, carried in the kernel's push constants.
  """
  def binary(_op, _shape, _a, _a_offset, _a_strides, _b, _b_offset, _b_strides),
    do: nif_error()

  @doc """
  A fused elementwise program of `type` (`:f16 :bf16 :f32 :f64`, or `:s32
  :s64 :u32 :u64`) over `shape`: `program` is a list of instruction words
  (`nxv_fused` in `nxv.h`), `inputs` a list of `{tensor, offset, strides |
  nil}` views of that type or immediates (binaries of one element of that
  type, native byte order, `nxv_fused_imm`), at least one of them a view.
  The result is the program's last register, bitwise what its ops compute
  one kernel each. `program` may also be a prepared program of
  `fused_program/3` for that type and input count.
  """
  def fused(_type, _shape, _program, _inputs), do: nif_error()

  @doc """
  `fused/4` with its result written into `dst` instead of a new tensor:
  its elements, in row-major order, go to `dst` from element `dst_offset`
  on (`nxv_fused_into`; a block of a concatenation computed in place).
  `dst` must be of `type` and hold the block, no input may read `dst`'s
  buffer, and, as with `copy_into/7`, `dst` must be a tensor the caller
  made and shares with no one. Returns `:ok`; raises `ArgumentError`
  otherwise, `dst` unchanged.
  """
  def fused_into(_dst, _dst_offset, _type, _shape, _program, _inputs), do: nif_error()

  @doc """
  `program` (a list of words, as `fused/4` takes it) prepared for runs
  over `ninputs` inputs of `type`: a handle that `fused/4` takes in place
  of the list. Its words are decoded and their operands checked once; its
  first run on a device checks its ops there, and later runs there skip
  those checks and, for the same layout of inputs (which are immediates,
  broadcast scalars or strided), the pipeline lookup (`nxv_fused_run` in
  `nxv.h`). `Nx.Vulkan.Compiler` prepares the programs of the plans it
  replays in one call. Raises `ArgumentError` for a malformed program.
  """
  @spec fused_program(atom(), pos_integer(), [non_neg_integer()]) :: reference()
  def fused_program(_type, _ninputs, _program), do: nif_error()

  @doc """
  `fused_program/3` for a program with a second result, register
  `second` (an instruction's register before the last), for
  `fused_pair/9` (`nxv_fused_program_create_pair` in `nxv.h`).
  """
  @spec fused_program(atom(), pos_integer(), [non_neg_integer()], pos_integer()) ::
          reference()
  def fused_program(_type, _ninputs, _program, _second), do: nif_error()

  @doc """
  Checks `program` (a list of words, as `fused/4` takes it) over
  `ninputs` inputs of `type` on `device` as `fused/4` (`second` 0) or
  `fused_pair/9` (`second` the second result's register) checks it before
  looking at any input: the type on that device, the counts, each word's
  operands and whether the device supports each op for the type
  (`nxv_fused_check` in `nxv.h`). Returns `:ok`, or raises as that call
  would. Creates no pipeline and queues nothing: `Nx.Vulkan.Compiler`
  chooses its programs with it, then runs only those it keeps.
  """
  @spec fused_check(reference(), atom(), pos_integer(), [non_neg_integer()], non_neg_integer()) ::
          :ok
  def fused_check(_device, _type, _ninputs, _program, _second), do: nif_error()

  @doc """
  `fused/4` of a program with a second result: besides its result (its
  last register) it stores register `second` (an instruction's register
  before the last) at every element, in one dispatch (`nxv_fused_pair`
  in `nxv.h`). The result goes into `dst0` from element `offset0` on and
  the second into `dst1` from `offset1` on, as `fused_into/6` writes its
  destination; where a `dst` is `nil`, that result is a new tensor (its
  offset, an integer still, is ignored). Two blocks of one buffer must
  not overlap.
  `program` is a list of words or a prepared program of `fused_program/4`
  with the same `second`. Returns a tuple of the new tensors, in order
  (`{}` when both go into destinations); raises `ArgumentError`
  otherwise, the destinations unchanged.
  """
  def fused_pair(_type, _shape, _program, _second, _inputs, _dst0, _offset0, _dst1, _offset1),
    do: nif_error()

  @doc """
  `out[i] = op(a[i])` over `shape`; `op` in `:copy :negate :abs :sign :sqrt
  :rsqrt :exp :log :sin :cos :tanh :sigmoid :floor :ceil :round
  :bitwise_not :square`. `:copy` with strides is a strided gather (slice,
  transpose, broadcast, reverse with negative strides).
  """
  def unary(_op, _shape, _a, _a_offset, _a_strides), do: nif_error()

  @doc """
  `out[i] = (a[i] op b[i]) ? 1 : 0` as a `:u8` tensor over `shape`; `op` in
  `:equal :not_equal :less :less_equal :greater :greater_equal :logical_and
  :logical_or :logical_xor`. a and b share a type (f32, f64, s32 or u8).
  Either operand may be an immediate scalar, as in `binary/8`.
  """
  def compare(_op, _shape, _a, _a_offset, _a_strides, _b, _b_offset, _b_strides),
    do: nif_error()

  @doc """
  `out[i] = pred[i] != 0 ? on_true[i] : on_false[i]` over `shape`; `pred`
  is `:u8`, on_true and on_false share the result type.
  """
  def select(
        _shape,
        _p,
        _p_offset,
        _p_strides,
        _a,
        _a_offset,
        _a_strides,
        _b,
        _b_offset,
        _b_strides
      ),
      do: nif_error()

  @doc "Converts a strided view over `shape` to `type` (float to int truncates, saturates, NaN -> 0)."
  def convert(_type, _shape, _a, _a_offset, _a_strides), do: nif_error()

  @doc """
  Reduces a view over `in_shape` over `axes` with `:sum :product :max :min`;
  result dense over the kept axes, of `type`: the operand's, or for sums and
  products of 8-, 16- and 32-bit integers the 64-bit type of their sign
  (read widened, accumulated in 64 bits).
  """
  def reduce(_op, _in_shape, _a, _a_offset, _a_strides, _axes, _type), do: nif_error()

  @doc """
  Index (s64) of the largest (`:argmax`) or smallest (`:argmin`) element over
  `axes`, counted row-major over them; ties to the highest index when
  `tie_high` is true.
  """
  def argreduce(_op, _tie_high, _in_shape, _a, _a_offset, _a_strides, _axes),
    do: nif_error()

  @doc """
  Indexed read into a dense tensor of `shape`: output coordinates `x` read
  `src[offset + x . src_strides + sum_j clamp(idx[x . index_strides + j]) * axis_strides[j]]`
  (`indices` is s64; out-of-range indices clamp to the axis).
  """
  def gather(
        _src,
        _offset,
        _indices,
        _shape,
        _src_strides,
        _index_strides,
        _axis_dims,
        _axis_strides
      ),
      do: nif_error()

  @doc """
  Window reduction (`:sum`, `:product`, `:max`, `:min`) of a dense tensor of
  `in_shape` into `out_shape`; padding positions contribute the identity.
  """
  def window_reduce(_op, _a, _in_shape, _out_shape, _window, _strides, _dilations, _pad_lo),
    do: nif_error()

  @doc """
  Discrete Fourier transform (`inverse`: the inverse, divided by `n`) of
  each row of a dense `rows` x `n` c64 or c128 tensor; components of
  magnitude at most `eps` are flushed to zero.
  """
  def fft(_a, _rows, _n, _inverse, _eps), do: nif_error()

  @doc """
  The Cholesky factor of each of `batch` dense `n` x `n` f32 or f64
  matrices (Nx's definition: `eps` added to each divisor, entries of at
  most `eps` in magnitude set to zero).
  """
  @spec cholesky(reference(), non_neg_integer(), non_neg_integer(), float()) :: reference()
  def cholesky(_a, _batch, _n, _eps), do: nif_error()

  @doc """
  The LU factorization with partial pivoting of each of `batch` dense `n`
  x `n` f32 or f64 matrices: `{p, l, u}` with `A = P L U`, each dense
  `batch x n x n` of the input's type; entries of L and U below `eps` in
  magnitude are zero.
  """
  @spec lu(reference(), non_neg_integer(), non_neg_integer(), float()) ::
          {reference(), reference(), reference()}
  def lu(_a, _batch, _n, _eps), do: nif_error()

  @doc """
  The QR factorization by Householder reflections (as `Nx.LinAlg.QR`
  defines it) of each of `batch` dense `m` x `n` f32 or f64 matrices:
  `{q, r}` with `A = Q R`; `complete` gives Q `m x m` and R `m x n`,
  otherwise Q `m x k` and R `k x n` with `k = min(m, n)`. Entries of at
  most `eps` in magnitude are zero.
  """
  @spec qr(
          reference(),
          non_neg_integer(),
          non_neg_integer(),
          non_neg_integer(),
          boolean(),
          float()
        ) ::
          {reference(), reference()}
  def qr(_a, _batch, _m, _n, _complete, _eps), do: nif_error()

  @doc """
  Runs the unshifted QR iteration of `Nx.LinAlg.eigh/2` (Nx.BinaryBackend's)
  on `batch` dense `n x n` matrices `a` (f32 or f64, `n` at most 64) with
  their accumulated eigenvector matrices `q` (same type and shape; `nil`:
  each symmetric `a` is first reduced to tridiagonal form as that eigh
  does, and Q starts as the product of its reflections): each
  step factors A = Q' R as `qr/6` does (entries of at most `eps` zero),
  then A becomes R Q' and Q becomes Q Q'; a matrix stops after the step
  that moved no entry of Q by more than `eps`, all after `max_iter` steps
  (at least one, at most 65536). Returns the final `{a, q}`.
  """
  @spec eigh_iterate(
          reference(),
          reference() | nil,
          non_neg_integer(),
          non_neg_integer(),
          non_neg_integer(),
          float()
        ) :: {reference(), reference()}
  def eigh_iterate(_a, _q, _batch, _n, _max_iter, _eps), do: nif_error()

  @doc """
  Solves `batch` triangular systems as `Nx.LinAlg.triangular_solve/3`
  defines them: `a` dense `batch x n x n`, `b` dense `batch x n x cols`
  (left side) or `batch x cols x n`, both f32 or both f64. Returns the
  solutions, laid out as `b`, and a u32 per system, 1 where `a` has a
  zero on its diagonal.
  """
  @spec triangular_solve(
          reference(),
          reference(),
          non_neg_integer(),
          non_neg_integer(),
          non_neg_integer(),
          boolean(),
          boolean(),
          boolean()
        ) :: {reference(), reference()}
  def triangular_solve(_a, _b, _batch, _n, _cols, _lower, _left_side, _transpose_a),
    do: nif_error()

  @doc """
  Convolution in the canonical layouts: `input` dense `in_shape` `[n, c,
  spatial...]`, `kernel` dense `kernel_shape` `[o, c / feature_groups,
  spatial...]` of the input's type, result dense `out_shape` `[n /
  batch_groups, o, spatial...]` (checked against the geometry). `strides`,
  `pad_lo`, `pad_hi` (negative values crop), `input_dilation` and
  `kernel_dilation` have one entry per spatial axis. Products accumulate in
  the compute type (f16/bf16 in f32).
  """
  def conv(
        _input,
        _kernel,
        _in_shape,
        _kernel_shape,
        _out_shape,
        _strides,
        _pad_lo,
        _pad_hi,
        _input_dilation,
        _kernel_dilation,
        _feature_groups,
        _batch_groups
      ),
      do: nif_error()

  @doc """
  Window scatter (`:max` or `:min`): each window of `a` (dense `in_shape`,
  windows `window` every `strides`, padded by `pad_lo`/`pad_hi`) selects its
  largest (smallest) element inside `a`, the last one on ties; the result,
  dense `in_shape` in `source`'s type, is `init` (one element of that type)
  plus, at each selected element, the `source` values of the windows that
  selected it (one source value per window, row-major), added in window
  order.
  """
  def window_scatter(_op, _a, _source, _init, _in_shape, _window, _strides, _pad_lo, _pad_hi),
    do: nif_error()

  @doc """
  Stable sort of each row of a dense `rows` x `len` tensor; `want` is
  `:values`, `:indices` (s64) or `:both` (a tuple).
  """
  def sort(_a, _rows, _len, _descending, _want), do: nif_error()

  @doc """
  Indexed write in place (`:put` or `:add`) of `count` update slices of
  `slice_shape` into `dst`; updates apply in order, out-of-range ones are
  skipped. Returns `:ok`.
  """
  def scatter(
        _op,
        _dst,
        _updates,
        _indices,
        _count,
        _slice_shape,
        _dst_strides,
        _axis_dims,
        _axis_strides
      ),
      do: nif_error()

  @doc "N-D transpose of a dense tensor of `in_shape` by `perm`."
  def transpose(_in_shape, _a, _perm), do: nif_error()

  @doc """
  Batched matmul: out dense `[batch, m, n]`; `a_strides = [batch, m, k]`,
  `b_strides = [batch, k, n]` element strides (0 batch stride broadcasts).
  """
  def matmul(_batch, _m, _n, _k, _a, _a_offset, _a_strides, _b, _b_offset, _b_strides),
    do: nif_error()

  @doc "Tensor of `count` elements of `type` equal to the one element encoded in `value` (native-endian bytes)."
  def fill(_device, _type, _count, _value), do: nif_error()

  @doc "Tensor of `shape` whose elements are their index along `axis`."
  def iota(_device, _type, _shape, _axis), do: nif_error()

  @doc """
  The index by which `replay/2` calls the NIF `name/arity`, or `nil` when a
  plan may not call it (only the functions that queue device work or make,
  describe and drop tensors on a normal scheduler may be called).
  """
  def replay_index(_name, _arity), do: nif_error()

  @doc """
  Runs a plan of NIF calls in one call: `Nx.Vulkan.Compiler`'s replays.

  `plan` is `{slot_count, ops, output_slots}`; `ops` a tuple of
  `{name, index, arg_specs, out_slots, free_slots}`: the NIF's name and
  its `index` from `replay_index/2` (an op whose name is not that index's
  in this build of the library is refused); `arg_specs` a tuple with one
  spec per argument;
  `out_slots` a tuple of the slots that take the tensors of the call's
  result, in order (the tensors of nested tuples and lists, other terms
  skipped); `free_slots` those whose tensors are deallocated after the
  call. A spec is `{:p, i}` (element `i` of `params`), `{:s, i}` (slot
  `i`'s tensor), `{:c, term}`, `{:v, spec, offset, strides}` (the view
  `{tensor, offset, strides}`), `{:l, specs}` or `{:t, specs}` (a list or
  tuple of the arguments of the tuple `specs`). A tuple of specs, and an
  op's `out_slots` and `free_slots`, hold at most 64 elements.

  Returns the tuple of the tensors in `output_slots`, and deallocates every
  other tensor it made. Raises what a call raises, or `ArgumentError` for a
  malformed plan, after deallocating every tensor it made. A long plan
  yields its scheduler about every millisecond.
  """
  def replay(_plan, _params), do: nif_error()

  @doc """
  `{direct, via_nif}`: how many ops every `replay/2` in this process has
  run without their NIF (their arguments decoded straight from the specs,
  their results kept without a handle until one is needed) and through
  it, counted when each replay call returned or yielded.
  """
  @spec replay_counts() :: {non_neg_integer(), non_neg_integer()}
  def replay_counts, do: nif_error()
end
