# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.PropertyTest do
    # Every real type, random shapes (rank 0 to 6, sizes 1, primes and small
    # composites; Nx 0.7.2 has no zero-sized axes, the C tests cover empty
    # tensors), random axes: each op on the device must match
    # Nx.BinaryBackend (integers exactly, floats within a tolerance by type),
    # with host fallbacks disabled.
    use ExUnit.Case, async: false
    import Bitwise
    @moduletag :nx

    @types [s: 8, s: 16, s: 32, s: 64, u: 8, u: 16, u: 32, u: 64, f: 16, bf: 16, f: 32, f: 64]
    @sizes [1, 1, 2, 3, 5, 7, 2, 3, 4, 13]
    @rounds 6

    setup do
      :rand.seed(:exsss, {3, 14, 15})
      :ok
    end

    defp vk(t), do: Nx.backend_copy(t, Nx.Vulkan.Backend)

    defp random_shape do
      rank = :rand.uniform(7) - 1
      shape = for _ <- 1..rank//1, do: Enum.random(@sizes)
      # Keep tensors small: shrink the largest axes until under 2000 elements.
      shape |> shrink() |> List.to_tuple()
    end

    defp shrink(dims) do
      if Enum.product(dims) > 2000 do
        {max, i} = dims |> Enum.with_index() |> Enum.max()
        dims |> List.replace_at(i, div(max, 2)) |> shrink()
      else
        dims
      end
    end

    # Host tensors of random values over the whole range of integer types
    # (wrapping is part of what is compared) and normal-ish floats.
    defp random(shape, {kind, bits} = type) do
      n = Tuple.product(shape)

      values =
        for _ <- 1..n//1 do
          case kind do
            :s -> :rand.uniform(1 <<< bits) - (1 <<< (bits - 1)) - 1
            :u -> :rand.uniform(1 <<< bits) - 1
            _ -> Float.round(:rand.normal() * 8, 3)
          end
        end

      Nx.tensor(values, type: type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
    end

    defp tolerance({:f, 16}), do: 2.0e-3
    defp tolerance({:bf, 16}), do: 1.6e-2
    defp tolerance({:f, 32}), do: 2.0e-6
    defp tolerance({:f, 64}), do: 1.0e-12
    defp tolerance(_), do: 0

    defp assert_match(got, want, tol, what) do
      assert got.shape == want.shape, what
      assert got.type == want.type, what
      g = got |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.to_flat_list()
      w = Nx.to_flat_list(want)

      Enum.zip(g, w)
      |> Enum.with_index()
      |> Enum.each(fn {{a, b}, i} ->
        ok =
          cond do
            a == b -> true
            is_number(a) and is_number(b) -> abs(a - b) <= tol * max(1.0, abs(b))
            is_struct(a, Complex) and is_struct(b, Complex) -> complex_close?(a, b, tol)
            true -> false
          end

        assert ok, "#{what}: element #{i}: got #{inspect(a)}, expected #{inspect(b)}"
      end)
    end

    # Components within tol of the magnitude (at least 1) of the expected
    # value; non-finite components must be equal.
    defp complex_close?(%Complex{re: ar, im: ai}, %Complex{re: br, im: bi} = b, tol) do
      scale = max(1.0, Complex.abs(b))

      Enum.all?([{ar, br}, {ai, bi}], fn
        {x, y} when is_number(x) and is_number(y) -> abs(x - y) <= tol * scale
        {x, y} -> x == y
      end)
    end

    defp check(what, tol, fun, args) do
      want = apply(fun, args)
      got = Nx.Vulkan.with_host_fallback(:raise, fn -> apply(fun, Enum.map(args, &vk/1)) end)
      assert_match(got, want, tol, what)
    end

    test "element-wise, reductions, indexing and sorting match Nx.BinaryBackend" do
      for type <- @types, _ <- 1..@rounds do
        shape = random_shape()
        a = random(shape, type)
        b = random(shape, type)
        tol = tolerance(type)
        rank = tuple_size(shape)
        what = "#{Nx.Type.to_string(type)} #{inspect(shape)}"
        float? = elem(type, 0) in [:f, :bf]

        for op <- [:add, :subtract, :multiply, :max, :min],
            do: check("#{op} #{what}", tol, &apply(Nx, op, [&1, &2]), [a, b])

        for op <- [:negate, :abs, :sign],
            do: check("#{op} #{what}", tol, &apply(Nx, op, [&1]), [a])

        for op <- [:equal, :less, :greater_equal],
            do: check("#{op} #{what}", 0, &apply(Nx, op, [&1, &2]), [a, b])

        check("select #{what}", 0, &Nx.select(Nx.greater(&1, &2), &1, &2), [a, b])

        if float? do
          check("exp #{what}", tol * 4, &Nx.exp(Nx.divide(&1, 8)), [a])
          check("divide #{what}", tol * 2, &Nx.divide(&1, Nx.add(Nx.abs(&2), 1)), [a, b])
          check("pow #{what}", tol * 4, &Nx.pow(Nx.abs(&1), Nx.divide(&2, 4)), [a, b])
        else
          check("bitwise_xor #{what}", 0, &Nx.bitwise_xor/2, [a, b])
          check("population_count #{what}", 0, &Nx.population_count/1, [a])
        end

        for target <- [{:s, 32}, {:f, 32}, {:u, 8}, {:f, 64}],
            do:
              check(
                "as_type #{what} -> #{inspect(target)}",
                tolerance(target),
                &Nx.as_type(&1, target),
                [Nx.clip(Nx.abs(a), 0, 100)]
              )

        if rank > 0 do
          axes = Enum.filter(0..(rank - 1), fn _ -> :rand.uniform(2) == 1 end)
          axis = :rand.uniform(rank) - 1
          small = Nx.remainder(a, 4)
          # Sums of small values: exact in every type.
          check("sum #{what} #{inspect(axes)}", tol, &Nx.sum(&1, axes: axes), [small])
          check("reduce_max #{what} #{inspect(axes)}", 0, &Nx.reduce_max(&1, axes: axes), [a])
          check("argmax #{what} #{axis}", 0, &Nx.argmax(&1, axis: axis, tie_break: :high), [a])
          check("argmin #{what} #{axis}", 0, &Nx.argmin(&1, axis: axis), [a])
          check("sort #{what} #{axis}", 0, &Nx.sort(&1, axis: axis, direction: :desc), [a])
          check("argsort #{what} #{axis}", 0, &Nx.argsort(&1, axis: axis), [a])

          perm = Enum.shuffle(Nx.axes(a))
          check("transpose #{what} #{inspect(perm)}", 0, &Nx.transpose(&1, axes: perm), [a])
          check("reverse #{what}", 0, &Nx.reverse(&1, axes: axes), [a])

          n = elem(shape, axis)

          if n > 0 do
            idx = Nx.tensor(for(_ <- 1..5, do: :rand.uniform(n) - 1), backend: Nx.BinaryBackend)
            check("take #{what} #{axis}", 0, &Nx.take(&1, &2, axis: axis), [a, idx])
          end
        end
      end
    end

    defp random_complex(shape, type) do
      Nx.complex(random(shape, {:f, 64}), random(shape, {:f, 64})) |> Nx.as_type(type)
    end

    test "complex types match Nx.BinaryBackend" do
      for type <- [c: 64, c: 128], _ <- 1..@rounds do
        shape = random_shape()
        a = random_complex(shape, type)
        b = random_complex(shape, type)
        tol = if type == {:c, 64}, do: 4.0e-6, else: 1.0e-12
        rank = tuple_size(shape)
        what = "#{Nx.Type.to_string(type)} #{inspect(shape)}"

        for op <- [:add, :subtract, :multiply, :divide],
            do: check("#{op} #{what}", tol, &apply(Nx, op, [&1, &2]), [a, b])

        check("pow #{what}", tol * 8, &Nx.pow(Nx.divide(&1, 8), Nx.divide(&2, 8)), [a, b])

        for op <- [:negate, :conjugate, :real, :imag, :abs, :phase, :sqrt, :sin, :cos, :tanh],
            do: check("#{op} #{what}", tol * 4, &apply(Nx, op, [&1]), [a])

        check("exp #{what}", tol * 8, &Nx.exp(Nx.divide(&1, 8)), [a])
        check("log #{what}", tol * 4, &Nx.log/1, [a])

        for op <- [:equal, :not_equal],
            do:
              check("#{op} #{what}", 0, &apply(Nx, op, [&1, &2]), [
                a,
                Nx.select(Nx.greater(Nx.real(b), 0), a, b)
              ])

        check("select #{what}", 0, &Nx.select(Nx.greater(Nx.real(&1), 0), &1, &2), [a, b])

        for target <- [{:f, 32}, {:f, 64}, {:s, 32}, {:c, 64}, {:c, 128}],
            do: check("as_type #{what} -> #{inspect(target)}", tol, &Nx.as_type(&1, target), [a])

        check("from real #{what}", 0, &Nx.as_type(&1, type), [random(shape, {:s, 16})])

        if rank > 0 do
          axes = Enum.filter(0..(rank - 1), fn _ -> :rand.uniform(2) == 1 end)
          axis = :rand.uniform(rank) - 1
          n = elem(shape, axis)
          check("sum #{what} #{inspect(axes)}", tol * 16, &Nx.sum(&1, axes: axes), [a])

          check(
            "product #{what} #{axis}",
            tol * 16,
            &Nx.product(Nx.divide(&1, 8), axes: [axis]),
            [a]
          )

          perm = Enum.shuffle(Nx.axes(a))
          check("transpose #{what} #{inspect(perm)}", 0, &Nx.transpose(&1, axes: perm), [a])
          check("reverse #{what}", 0, &Nx.reverse(&1, axes: axes), [a])
          check("concatenate #{what} #{axis}", 0, &Nx.concatenate([&1, &2], axis: axis), [a, b])
          idx = Nx.tensor(for(_ <- 1..5, do: :rand.uniform(n) - 1), backend: Nx.BinaryBackend)
          check("take #{what} #{axis}", 0, &Nx.take(&1, &2, axis: axis), [a, idx])
          length = Enum.random([1, n, n + 3, max(n - 1, 1), 8])
          fft_tol = tol * 16 * n

          # The reference moves the axis last: Nx 0.7.2's BinaryBackend
          # puts the axes of a rank >= 3 result back in the wrong order
          # when the axis is not one of the last two.
          moved = Enum.reject(Nx.axes(a), &(&1 == axis)) ++ [axis]
          back = Enum.map(Nx.axes(a), fn i -> Enum.find_index(moved, &(&1 == i)) end)

          for op <- [:fft, :ifft] do
            want =
              apply(Nx, op, [Nx.transpose(a, axes: moved), [length: length]])
              |> Nx.transpose(axes: back)

            got =
              Nx.Vulkan.with_host_fallback(:raise, fn ->
                apply(Nx, op, [vk(a), [axis: axis, length: length]])
              end)

            assert_match(got, want, fft_tol, "#{op} #{what} #{axis} #{length}")
          end

          k = elem(shape, rank - 1)
          c = random_complex({k, 3}, type)
          check("dot #{what}", tol * 16 * k, &Nx.dot/2, [a, c])
        end
      end
    end

    test "complex products with infinite parts match Nx.BinaryBackend" do
      # Complex.multiply/2's rules: a real right factor scales the left, an
      # imaginary one rotates it, and Nx.BinaryBackend multiplies a real
      # operand's numbers (a number, a real tensor) as reals; a product
      # multiplies each element into the product so far.
      for type <- [c: 64, c: 128] do
        z =
          [{:infinity, 3}, {-2, 4}, {3, :neg_infinity}, {1, 2}, {:nan, 1}, {0, :infinity}]
          |> Enum.map(fn {re, im} -> Complex.new(re, im) end)
          |> Nx.tensor(type: type, backend: Nx.BinaryBackend)

        real = Nx.tensor([2.0, -0.5, 4.0, 1.0, 3.0, 0.25], backend: Nx.BinaryBackend)
        i2 = Nx.tensor(Complex.new(0, 2), type: type, backend: Nx.BinaryBackend)
        two = Nx.tensor(Complex.new(2, 0), type: type, backend: Nx.BinaryBackend)
        what = Nx.Type.to_string(type)

        check("#{what} z 2", 0, &Nx.multiply(&1, 2), [z])
        check("#{what} 2 z", 0, &Nx.multiply(2, &1), [z])
        check("#{what} z real", 0, &Nx.multiply/2, [z, real])
        check("#{what} real z", 0, &Nx.multiply/2, [real, z])
        check("#{what} z 2i", 0, &Nx.multiply/2, [z, i2])
        check("#{what} z (2 + 0i)", 0, &Nx.multiply/2, [z, two])
        pair = Nx.slice(z, [0], [2])
        check("#{what} product", 0, &Nx.product/1, [pair])
        assert_match(Nx.product(vk(pair)), Nx.multiply(z[0], z[1]), 0, "#{what} product")
      end
    end
  end
else
  defmodule Nx.Vulkan.PropertyTest do
    use ExUnit.Case
    @moduletag :nx

    test "property tests need Nx"
  end
end
