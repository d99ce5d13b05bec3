# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.ConvTest do
    # Nx.conv (every option, permutations, groups, gradients) and
    # Nx.window_scatter_max/min (and window_max/min gradients) on the
    # device, with host fallbacks raising, against Nx.BinaryBackend.
    #
    # Window scatter: Nx.BinaryBackend pads the tensor with init_value and
    # lets padding be selected, then maps positions to the output without
    # removing the low padding; it is compared where neither matters (no
    # low padding, values above init_value) and otherwise against a
    # reference written here, in which padding is never selected (as XLA
    # defines select-and-scatter). It also writes results of types other
    # than f32, s32 and s64 incorrectly, so other types are compared with
    # the reference only.
    use ExUnit.Case, async: false
    import Nx.Defn
    @moduletag :nx

    @vk Nx.Vulkan.Backend

    setup do
      Nx.Vulkan.reset_fallbacks()
      :ok
    end

    defp vk(t), do: Nx.backend_copy(t, @vk)

    # Runs fun on device copies of args with host fallbacks raising.
    defp on_device(fun, args) do
      result = Nx.Vulkan.with_host_fallback(:raise, fn -> apply(fun, Enum.map(args, &vk/1)) end)
      assert Nx.Vulkan.fallbacks() == %{}
      result
    end

    defp random(key, shape, type \\ :f32) do
      {t, _} = Nx.Random.uniform(Nx.Random.key(key), -1.0, 1.0, shape: shape, type: :f32)
      Nx.as_type(t, type)
    end

    # Small multiples of 1/8: products and their sums are exact in f32.
    defp eighths(key, shape, type) do
      {t, _} = Nx.Random.randint(Nx.Random.key(key), -8, 9, shape: shape, type: :s32)
      t |> Nx.divide(8) |> Nx.as_type(type)
    end

    defp assert_close(got, want, tol, what) do
      assert %@vk{} = got.data, what
      assert got.shape == want.shape, "#{what}: shape #{inspect(got.shape)}"
      assert got.type == want.type, "#{what}: type #{inspect(got.type)}"
      g = got |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.to_flat_list()
      w = Nx.to_flat_list(want)

      Enum.zip(g, w)
      |> Enum.with_index()
      |> Enum.each(fn {{a, b}, i} ->
        assert a == b or abs(a - b) <= tol * max(1.0, abs(b)),
               "#{what}: element #{i}: got #{inspect(a)}, expected #{inspect(b)}"
      end)
    end

    # {input shape, kernel shape, options}
    @conv_cases [
      {{2, 3, 8, 8}, {4, 3, 3, 3}, []},
      {{2, 3, 9, 7}, {4, 3, 3, 2}, [strides: [2, 1], padding: :same]},
      {{1, 2, 9, 8}, {3, 2, 3, 3}, [padding: [{-1, 2}, {1, 0}]]},
      {{2, 2, 5, 6}, {3, 2, 2, 3}, [input_dilation: [2, 1], kernel_dilation: [1, 2]]},
      {{2, 2, 6, 6}, {2, 2, 3, 3}, [strides: 2, padding: [{2, 1}, {0, 2}], input_dilation: 2]},
      {{2, 6, 7, 7}, {6, 2, 3, 3}, [feature_group_size: 3, padding: :same]},
      {{2, 4, 7, 7}, {4, 1, 3, 3}, [feature_group_size: 4, kernel_dilation: 2]},
      {{4, 3, 5, 5}, {4, 3, 3, 3}, [batch_group_size: 2]},
      {{6, 2, 6, 5}, {6, 2, 2, 2}, [batch_group_size: 3, strides: [2, 1]]},
      {{3, 4, 11}, {5, 4, 3}, [strides: [2], padding: [{1, 3}]]},
      {{2, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, [strides: [1, 2, 1], padding: :same]},
      {{1, 2, 3, 3, 4, 3}, {2, 2, 2, 2, 2, 2}, [kernel_dilation: [1, 1, 2, 1]]}
    ]

    test "conv matches Nx.BinaryBackend over strides, padding, dilations and groups" do
      for {{in_shape, k_shape, opts}, i} <- Enum.with_index(@conv_cases) do
        x = random(i, in_shape)
        k = random(100 + i, k_shape)
        want = Nx.conv(x, k, opts)
        got = on_device(&Nx.conv(&1, &2, opts), [x, k])
        assert_close(got, want, 1.0e-5, "conv #{inspect(in_shape)} #{inspect(opts)}")
      end
    end

    test "conv with input, kernel and output permutations" do
      # Channels-last input, HWIO kernel, channels-last output.
      x = random(1, {2, 7, 6, 3})
      k = random(2, {3, 3, 3, 4})

      opts = [
        input_permutation: [0, 3, 1, 2],
        kernel_permutation: [3, 2, 0, 1],
        output_permutation: [0, 3, 1, 2],
        padding: :same,
        strides: [1, 2]
      ]

      want = Nx.conv(x, k, opts)
      assert want.shape == {2, 7, 3, 4}
      got = on_device(&Nx.conv(&1, &2, opts), [x, k])
      assert_close(got, want, 1.0e-5, "channels last")

      # Named permutations and a batch/channel swap with feature groups.
      xn = random(3, {5, 4, 6, 6}) |> Nx.rename([:c, :n, :h, :w])
      kn = random(4, {5, 3, 2, 2}) |> Nx.rename([:i, :o, :h, :w])

      named = [
        input_permutation: [:n, :c, :h, :w],
        kernel_permutation: [:o, :i, :h, :w],
        output_permutation: [:c, :n, :h, :w],
        kernel_dilation: 2
      ]

      want = Nx.conv(xn, kn, named)
      got = on_device(&Nx.conv(&1, &2, named), [xn, kn])
      assert_close(got, want, 1.0e-5, "named permutations")
    end

    test "conv in every float type, integer inputs and mixed backends" do
      for {type, tol} <- [f64: 1.0e-12, f16: 1.0e-3, bf16: 1.0e-2, f32: 1.0e-6] do
        x = eighths(1, {2, 3, 6, 5}, type)
        k = eighths(2, {4, 3, 3, 2}, type)
        opts = [padding: [{1, 0}, {-1, 1}], strides: [1, 2]]
        want = Nx.conv(x, k, opts)
        got = on_device(&Nx.conv(&1, &2, opts), [x, k])
        assert_close(got, want, tol, "conv #{type}")
      end

      # Complex: complex products in the kernel (canonical layouts).
      x = Nx.complex(random(7, {2, 2, 5, 4}), random(8, {2, 2, 5, 4}))
      k = Nx.complex(random(9, {3, 2, 2, 2}), random(10, {3, 2, 2, 2}))
      opts = [padding: [{1, 0}, {0, 1}], strides: [2, 1], kernel_dilation: [1, 2]]
      got = on_device(&Nx.conv(&1, &2, opts), [x, k]) |> Nx.backend_copy(Nx.BinaryBackend)
      want = Nx.conv(x, k, opts)
      assert got.type == {:c, 64}
      assert Nx.all_close(got, want, atol: 1.0e-5) |> Nx.to_number() == 1

      # s64 inputs: Nx.conv computes in f32.
      x = Nx.iota({1, 2, 5, 5}) |> Nx.remainder(7)
      k = Nx.iota({3, 2, 2, 2}) |> Nx.subtract(10)
      got = on_device(&Nx.conv/2, [x, k])
      assert_close(got, Nx.conv(x, k), 0, "s64 inputs")

      # The kernel on the host, the input on the device.
      x = random(5, {1, 2, 5, 5})
      k = random(6, {2, 2, 3, 3})

      got = Nx.Vulkan.with_host_fallback(:raise, fn -> Nx.conv(vk(x), k, padding: :same) end)

      assert_close(got, Nx.conv(x, k, padding: :same), 1.0e-5, "mixed backends")
    end

    defn conv_loss(x, k, w, opts \\ []) do
      x |> Nx.conv(k, opts) |> Nx.multiply(w) |> Nx.sum()
    end

    test "conv gradients run on the device and match Nx.BinaryBackend" do
      cases = [
        {{2, 3, 7, 6}, {4, 3, 3, 2}, [strides: [2, 1], padding: :same]},
        {{1, 2, 8, 8}, {3, 2, 3, 3}, [padding: [{-1, 2}, {2, 0}], kernel_dilation: [2, 1]]},
        # One input channel (an image model's first layer): the kernel
        # gradient's batch/channel swaps move only axes of one element.
        {{3, 1, 6, 6}, {4, 1, 3, 3}, []},
        {{2, 2, 5, 5}, {2, 2, 2, 2}, [input_dilation: [2, 1], strides: 2]},
        {{2, 4, 6, 6}, {6, 2, 3, 3}, [feature_group_size: 2, padding: :same]},
        {{4, 3, 5, 6}, {4, 3, 3, 3}, [batch_group_size: 2, padding: [{1, 1}, {0, 0}]]},
        {{2, 6, 5, 3}, {3, 2, 3, 4},
         [
           input_permutation: [0, 3, 1, 2],
           kernel_permutation: [3, 2, 0, 1],
           output_permutation: [0, 3, 1, 2],
           padding: :same
         ]}
      ]

      for {{in_shape, k_shape, opts}, i} <- Enum.with_index(cases) do
        x = random(10 + i, in_shape)
        k = random(20 + i, k_shape)
        w = Nx.conv(x, k, opts) |> Nx.shape() |> then(&random(30 + i, &1))

        grad = fn x, k, w ->
          Nx.Defn.grad({x, k}, &conv_loss(elem(&1, 0), elem(&1, 1), w, opts))
        end

        {gx, gk} = Nx.Defn.jit_apply(grad, [x, k, w], compiler: Nx.Defn.Evaluator)

        {dx, dk} =
          on_device(&Nx.Defn.jit_apply(grad, [&1, &2, &3], compiler: Nx.Defn.Evaluator), [x, k, w])

        assert_close(dx, gx, 1.0e-5, "grad x #{inspect(opts)}")
        assert_close(dk, gk, 1.0e-5, "grad kernel #{inspect(opts)}")
      end
    end

    ## Window scatter

    # The reference: each window scans its positions inside the tensor in
    # row-major order with >= (max) or <= (min); source values add up at
    # the selected positions in window order, over init.
    defp ref_window_scatter(op, t, source, init, window, opts) do
      dims = Tuple.to_list(t.shape)
      rank = length(dims)
      strides = opts[:strides] || List.duplicate(1, rank)
      ones = List.duplicate(1, rank)
      {_, padding} = Nx.Shape.pool(t.shape, window, strides, opts[:padding] || :valid, ones)
      win = Tuple.to_list(window)
      values = t |> Nx.to_flat_list() |> List.to_tuple()
      src = Nx.to_flat_list(source)
      type = Nx.Type.merge(source.type, init.type)
      init = Nx.to_number(init)

      wdims =
        Enum.zip_with([dims, win, strides, padding], fn [d, w, s, {lo, hi}] ->
          div(d + lo + hi - w, s) + 1
        end)

      in_strides = dims |> Enum.reverse() |> Enum.scan(1, &(&1 * &2)) |> Enum.reverse()
      in_strides = tl(in_strides) ++ [1]
      better? = if op == :max, do: &>=/2, else: &<=/2

      scattered =
        Enum.zip(cartesian(wdims), src)
        |> Enum.reduce(%{}, fn {w, v}, acc ->
          selected =
            cartesian(win)
            |> Enum.map(fn j ->
              Enum.zip_with([w, j, strides, padding], fn [wi, ji, s, {lo, _}] ->
                wi * s - lo + ji
              end)
            end)
            |> Enum.filter(fn pos ->
              Enum.zip(pos, dims) |> Enum.all?(fn {p, d} -> p >= 0 and p < d end)
            end)
            |> Enum.map(fn pos -> Enum.zip_with(pos, in_strides, &*/2) |> Enum.sum() end)
            |> Enum.reduce(nil, fn flat, best ->
              x = elem(values, flat)

              case best do
                {_, b} -> if better?.(x, b), do: {flat, x}, else: best
                nil -> {flat, x}
              end
            end)

          case selected do
            {flat, _} -> Map.update(acc, flat, [v], &(&1 ++ [v]))
            nil -> acc
          end
        end)

      for(i <- 0..(Nx.size(t) - 1), do: Enum.reduce(Map.get(scattered, i, []), init, &(&2 + &1)))
      |> Nx.tensor(type: type)
      |> Nx.reshape(t.shape)
    end

    defp cartesian([]), do: [[]]
    defp cartesian([d | rest]), do: for(i <- 0..(d - 1), r <- cartesian(rest), do: [i | r])

    defp scatter_fun(:max), do: &Nx.window_scatter_max/5
    defp scatter_fun(:min), do: &Nx.window_scatter_min/5

    test "window_scatter_max/min match Nx.BinaryBackend (no low padding)" do
      t =
        Nx.tensor([
          [7, 2, 5, 3, 10, 2],
          [3, 8, 9, 3, 4, 2],
          [1, 5, 7, 5, 6, 1],
          [0, 6, 2, 7, 2, 8]
        ])

      src = Nx.tensor([[2, 6], [3, 1]])

      for op <- [:max, :min] do
        f = scatter_fun(op)
        opts = [strides: [2, 3], padding: :valid]
        want = f.(t, src, 0, {2, 3}, opts)
        got = on_device(&f.(&1, &2, 0, {2, 3}, opts), [t, src])
        assert_close(got, want, 0, "#{op} doc example")
      end

      # f32 with ties (values in {1, 2, 3}), overlapping windows, high
      # padding only, strides.
      {v, _} = Nx.Random.randint(Nx.Random.key(9), 1, 4, shape: {2, 3, 9, 8}, type: :s32)
      v = Nx.as_type(v, :f32)

      for op <- [:max, :min],
          {window, opts} <- [
            {{1, 1, 3, 3}, [strides: [1, 1, 1, 1], padding: :valid]},
            {{1, 1, 2, 2}, [strides: [1, 1, 2, 2], padding: :same]},
            {{1, 2, 3, 2}, [strides: [1, 1, 2, 3], padding: [{0, 0}, {0, 0}, {0, 2}, {0, 1}]]}
          ] do
        f = scatter_fun(op)
        # Nx.BinaryBackend pads with init_value: below every value for max,
        # above for min, so that padding is not selected there either.
        init = if op == :max, do: 0.5, else: 10.0
        out_shape = Nx.window_max(v, window, opts) |> Nx.shape()
        src = eighths(3, out_shape, :f32)
        want = f.(v, src, init, window, opts)
        got = on_device(&f.(&1, &2, init, window, opts), [v, src])
        assert_close(got, want, 0, "#{op} #{inspect(window)} #{inspect(opts)}")
        ref = ref_window_scatter(op, v, src, Nx.tensor(init), window, opts)
        assert_close(got, ref, 0, "#{op} reference #{inspect(window)}")
      end
    end

    test "window_scatter_max/min with low and negative padding and every type" do
      for {type, i} <- Enum.with_index([:f32, :f64, :f16, :bf16, :s32, :s64, :u8, :s8]),
          op <- [:max, :min],
          {window, opts} <- [
            {{2, 3}, [strides: [1, 2], padding: [{1, 1}, {2, 0}]]},
            {{3, 3}, [strides: [2, 2], padding: :same]},
            {{2, 2}, [strides: [2, 1], padding: [{-1, 0}, {0, -2}]]}
          ] do
        {t, _} = Nx.Random.randint(Nx.Random.key(i), 0, 5, shape: {7, 8}, type: :s32)
        t = Nx.as_type(t, type)
        f = scatter_fun(op)
        out_shape = Nx.window_max(t, window, opts) |> Nx.shape()
        {src, _} = Nx.Random.randint(Nx.Random.key(50 + i), 1, 9, shape: out_shape, type: :s32)
        src = Nx.as_type(src, type)
        init = Nx.tensor(2, type: type)
        got = on_device(&f.(&1, &2, &3, window, opts), [t, src, init])
        want = ref_window_scatter(op, t, src, init, window, opts)
        assert_close(got, want, 0, "#{op} #{type} #{inspect(window)} #{inspect(opts)}")
      end
    end

    test "window_max and window_min gradients run on the device" do
      x = random(40, {2, 3, 8, 8}) |> Nx.abs() |> Nx.add(0.1)
      w = random(41, {2, 3, 4, 4})

      for op <- [:window_max, :window_min] do
        loss = fn x, w ->
          apply(Nx, op, [x, {1, 1, 2, 2}, [strides: [1, 1, 2, 2]]]) |> Nx.multiply(w) |> Nx.sum()
        end

        grad = fn x, w -> Nx.Defn.grad(x, &loss.(&1, w)) end
        want = Nx.Defn.jit_apply(grad, [x, w], compiler: Nx.Defn.Evaluator)
        got = on_device(&Nx.Defn.jit_apply(grad, [&1, &2], compiler: Nx.Defn.Evaluator), [x, w])
        assert_close(got, want, 1.0e-6, "grad #{op}")
      end

      # Same padding with a low pad (window 3): against the reference.
      xs = random(42, {1, 2, 7, 7})
      ws = random(43, {1, 2, 4, 4})

      loss = fn x, w ->
        x
        |> Nx.window_max({1, 1, 3, 3}, strides: [1, 1, 2, 2], padding: :same)
        |> Nx.multiply(w)
        |> Nx.sum()
      end

      got =
        on_device(
          &Nx.Defn.jit_apply(fn x, w -> Nx.Defn.grad(x, fn x -> loss.(x, w) end) end, [&1, &2],
            compiler: Nx.Defn.Evaluator
          ),
          [xs, ws]
        )

      opts = [strides: [1, 1, 2, 2], padding: [{0, 0}, {0, 0}, {1, 1}, {1, 1}]]
      want = ref_window_scatter(:max, xs, ws, Nx.tensor(0.0), {1, 1, 3, 3}, opts)
      assert_close(got, want, 1.0e-6, "grad window_max same padding")
    end
  end
else
  defmodule Nx.Vulkan.ConvTest do
    use ExUnit.Case
    @moduletag :nx

    test "conv tests need Nx"
  end
end
