# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.BackendTest.AddOne do
    @moduledoc false
    # A block struct (Nx 0.12+ blocks) for the block/4 test.
    defstruct []
  end

  defmodule Nx.Vulkan.BackendTest do
    # Nx.Vulkan.Backend against Nx.BinaryBackend on random inputs, plus the
    # backend's own semantics (memory, transfer, inspect, options, fallback
    # policy, asynchrony, concurrency).
    use ExUnit.Case, async: false
    @moduletag :nx

    alias Nx.Vulkan.Backend, as: VB
    alias Nx.Vulkan.BackendTest.AddOne

    setup do
      :rand.seed(:exsss, {17, 29, 41})
      :ok
    end

    ## Helpers

    defp vk(%Nx.Tensor{} = t), do: Nx.backend_copy(t, VB)
    defp host(%Nx.Tensor{} = t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    # Runs fun with host fallbacks disabled: it must stay on the device.
    defp native(fun), do: Nx.Vulkan.with_host_fallback(:raise, fun)

    # A random host tensor: floats in [lo, hi), integers in [lo, hi].
    defp random(shape, type, range \\ nil) do
      type = Nx.Type.normalize!(type)
      {lo, hi} = range || default_range(type)
      count = Tuple.product(shape)

      binary =
        for _ <- 1..count//1, into: <<>> do
          case type do
            {:f, 32} -> <<lo + :rand.uniform() * (hi - lo)::float-32-native>>
            {:f, 64} -> <<lo + :rand.uniform() * (hi - lo)::float-64-native>>
            {:s, 32} -> <<lo + :rand.uniform(hi - lo + 1) - 1::signed-32-native>>
          end
        end

      binary |> Nx.from_binary(type, backend: Nx.BinaryBackend) |> Nx.reshape(shape)
    end

    defp default_range({:f, _}), do: {-4.0, 4.0}
    defp default_range({:s, _}), do: {-100, 100}

    defp tolerance({:f, 32}), do: 2.0e-5
    defp tolerance({:f, 64}), do: 1.0e-12
    defp tolerance(_), do: 0

    # got (a Nx.Vulkan.Backend tensor) equals expected (computed on
    # Nx.BinaryBackend) in shape, type and names, and in value up to a
    # relative/absolute tolerance for floats (exact for integers).
    defp assert_same(got, expected, tol \\ nil) do
      assert %VB{} = got.data
      assert got.shape == expected.shape
      assert got.type == expected.type
      assert got.names == expected.names
      tol = tol || tolerance(expected.type)
      got_list = got |> host() |> Nx.to_flat_list()
      expected_list = Nx.to_flat_list(expected)
      assert length(got_list) == length(expected_list)

      Enum.zip(got_list, expected_list)
      |> Enum.with_index()
      |> Enum.each(fn {{g, e}, i} ->
        unless close?(g, e, tol) do
          flunk("""
          element #{i} differs: got #{inspect(g)}, expected #{inspect(e)}
          got:      #{inspect(host(got), limit: 20)}
          expected: #{inspect(expected, limit: 20)}
          """)
        end
      end)
    end

    defp close?(same, same, _tol), do: true
    defp close?(g, e, tol) when is_float(g) and is_float(e), do: abs(g - e) <= tol * (1 + abs(e))
    defp close?(g, e, _tol) when is_integer(g) and is_integer(e), do: g == e
    defp close?(_, _, _), do: false

    defp fallback_count(op), do: Map.get(Nx.Vulkan.fallbacks(), op, 0)

    # A complex Hermitian matrix on the host: its eigh has no kernels.
    defp hermitian do
      Nx.tensor(
        [
          [Complex.new(2.0, 0.0), Complex.new(0.0, 1.0)],
          [Complex.new(0.0, -1.0), Complex.new(2.0, 0.0)]
        ],
        backend: Nx.BinaryBackend
      )
    end

    ## Element-wise ops

    @shape_pairs [
      {{}, {}},
      {{7}, {7}},
      {{7}, {}},
      {{}, {3, 2}},
      {{2, 3}, {3}},
      {{4, 1}, {1, 3}},
      {{2, 1, 4}, {3, 1}},
      {{2, 3, 4, 5}, {1, 3, 1, 5}},
      {{3, 2, 2, 2}, {}},
      {{1, 1}, {1}}
    ]

    @binary_ops %{
      {:f, 32} => [:add, :subtract, :multiply, :divide, :max, :min, :remainder, :atan2],
      {:f, 64} => [:add, :subtract, :multiply, :divide, :max, :min, :remainder],
      {:s, 32} => [
        :add,
        :subtract,
        :multiply,
        :max,
        :min,
        :bitwise_and,
        :bitwise_or,
        :bitwise_xor
      ]
    }

    for {type, ops} <- @binary_ops do
      test "binary ops on #{inspect(type)} match Nx.BinaryBackend, with broadcasting" do
        type = unquote(Macro.escape(type))

        for {ls, rs} <- @shape_pairs, op <- unquote(ops) do
          a = random(ls, type)
          b = random(rs, type)
          expected = apply(Nx, op, [a, b])
          got = native(fn -> apply(Nx, op, [vk(a), vk(b)]) end)
          assert_same(got, expected)
        end
      end
    end

    test "integer division, quotient, remainder, shifts and pow on s32" do
      for {ls, rs} <- @shape_pairs do
        a = random(ls, :s32)
        # Non-zero divisors of both signs.
        b = random(rs, :s32, {1, 9})
        sign = Nx.select(Nx.greater(random(rs, :s32, {0, 1}), 0), 1, -1) |> Nx.as_type(:s32)
        b = Nx.multiply(b, sign)

        for op <- [:quotient, :remainder, :divide] do
          assert_same(native(fn -> apply(Nx, op, [vk(a), vk(b)]) end), apply(Nx, op, [a, b]))
        end

        shift = random(rs, :s32, {0, 31})

        for op <- [:left_shift, :right_shift] do
          assert_same(
            native(fn -> apply(Nx, op, [vk(a), vk(shift)]) end),
            apply(Nx, op, [a, shift])
          )
        end

        small = random(ls, :s32, {-5, 5})
        exp = random(rs, :s32, {0, 6})
        assert_same(native(fn -> Nx.pow(vk(small), vk(exp)) end), Nx.pow(small, exp))
      end
    end

    test "f32 and f64 pow on the device for every base" do
      for {ls, _} <- @shape_pairs, e <- [2, 3, -1] do
        a = random(ls, :f32)
        assert_same(native(fn -> Nx.pow(vk(a), e) end), Nx.pow(a, e), 1.0e-5)
      end

      # (Nx.BinaryBackend raises for negative bases with fractional
      # exponents; the device gives NaN there, as XLA does.)
      a = Nx.abs(random({5, 3}, :f32))
      assert_same(native(fn -> Nx.pow(vk(a), 0.5) end), Nx.pow(a, 0.5), 1.0e-5)

      a = random({3, 4}, :f32)
      assert_same(native(fn -> Nx.pow(2.0, vk(a)) end), Nx.pow(2.0, a), 1.0e-5)
      assert_same(native(fn -> Nx.pow(-2.0, vk(Nx.tensor(3.0))) end), Nx.tensor(-8.0))

      d = random({3, 4}, :f64)
      assert_same(native(fn -> Nx.pow(vk(d), 3) end), Nx.pow(d, 3), 1.0e-12)
      d = Nx.abs(d)
      assert_same(native(fn -> Nx.pow(vk(d), 0.37) end), Nx.pow(d, 0.37), 1.0e-14)
      assert_same(native(fn -> Nx.pow(vk(d), -7) end), Nx.pow(d, -7), 1.0e-12)
    end

    @unary_ops %{
      {:f, 32} =>
        [:negate, :abs, :sign, :sin, :cos, :tanh, :sigmoid, :exp, :floor, :ceil, :round] ++
          [sqrt: :positive, rsqrt: :positive, log: :positive],
      {:f, 64} =>
        [:negate, :abs, :sign, :floor, :ceil, :round] ++ [sqrt: :positive, rsqrt: :positive],
      {:s, 32} => [:negate, :abs, :sign, :bitwise_not]
    }

    for {type, ops} <- @unary_ops do
      test "unary ops on #{inspect(type)} match Nx.BinaryBackend" do
        type = unquote(Macro.escape(type))

        for shape <- [{}, {1}, {9}, {3, 5}, {2, 3, 4}, {2, 2, 3, 3}, {1, 2, 1}],
            op <- unquote(ops) do
          {op, range} =
            case op do
              {op, :positive} -> {op, {0.1, 8.0}}
              op -> {op, nil}
            end

          a = random(shape, type, range)
          expected = apply(Nx, op, [a])
          got = native(fn -> apply(Nx, op, [vk(a)]) end)
          # GPU transcendental functions are within a few ulps.
          tol = if elem(type, 0) == :f and elem(type, 1) == 32, do: 1.0e-5, else: nil
          assert_same(got, expected, tol)
        end
      end
    end

    test "round is half away from zero" do
      a = Nx.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997], backend: Nx.BinaryBackend)
      assert_same(native(fn -> Nx.round(vk(a)) end), Nx.round(a))
    end

    test "unary ops on integers convert to float on the device" do
      a = random({4, 3}, :s32, {1, 20})

      for op <- [:exp, :sqrt, :log, :sin, :sigmoid] do
        assert_same(native(fn -> apply(Nx, op, [vk(a)]) end), apply(Nx, op, [a]), 1.0e-5)
      end
    end

    test "type promotion converts inputs on the device" do
      pairs = [
        {{:s, 32}, {:f, 32}},
        {{:f, 32}, {:f, 64}},
        {{:s, 32}, {:f, 64}},
        {{:f, 64}, {:s, 32}}
      ]

      for {lt, rt} <- pairs, op <- [:add, :multiply, :subtract, :max, :divide] do
        a = random({3, 4}, lt)
        b = random({4}, rt)
        got = native(fn -> apply(Nx, op, [vk(a), vk(b)]) end)
        assert got.type == Nx.Type.merge(lt, rt)
        assert_same(got, apply(Nx, op, [a, b]))
      end

      # s32 / s32 is float division.
      a = random({5}, :s32)
      b = random({5}, :s32, {1, 7})
      got = native(fn -> Nx.divide(vk(a), vk(b)) end)
      assert got.type == {:f, 32}
      assert_same(got, Nx.divide(a, b))
    end

    test "an integer or narrower float operand is read as it is, in one device op" do
      # {result type, the other operand's type}
      pairs = [
        {{:f, 32}, {:u, 8}},
        {{:f, 32}, {:s, 64}},
        {{:f, 32}, {:u, 64}},
        {{:f, 32}, {:f, 16}},
        {{:f, 32}, {:bf, 16}},
        {{:f, 16}, {:s, 32}},
        {{:f, 16}, {:u, 8}},
        {{:bf, 16}, {:u, 16}},
        {{:f, 64}, {:f, 32}},
        {{:f, 64}, {:s, 8}}
      ]

      # u's operand: the same shape, a row broadcast, a column broadcast, a
      # transposed view (read in place), and the other operand a number.
      layouts = [:same, :row, :column, :transposed, :number]

      for {t, u} <- pairs,
          layout <- layouts,
          op <- [:add, :subtract, :multiply, :divide, :max, :min],
          u_first <- [true, false] do
        {lo, hi} = if elem(u, 0) == :u, do: {0.0, 200.0}, else: {-100.0, 100.0}

        u_host =
          case layout do
            :row -> random({4}, :f32, {lo, hi})
            :column -> random({3, 1}, :f32, {lo, hi})
            :transposed -> random({4, 3}, :f32, {lo, hi})
            _ -> random({3, 4}, :f32, {lo, hi})
          end
          |> Nx.as_type(u)

        # No zeros: Nx.BinaryBackend raises on a float division by zero.
        u_host = Nx.select(Nx.equal(u_host, 0), Nx.tensor(3, type: u), u_host)
        t_host = random({3, 4}, :f32, {0.5, 50.0}) |> Nx.as_type(t)
        t_dev = if layout == :number, do: 0.75, else: vk(t_host)
        t_ref = if layout == :number, do: 0.75, else: t_host
        u_dev = vk(u_host)
        u_dev = if layout == :transposed, do: Nx.transpose(u_dev), else: u_dev
        u_ref = if layout == :transposed, do: Nx.transpose(u_host), else: u_host

        run = fn ->
          native(fn ->
            if u_first,
              do: apply(Nx, op, [u_dev, t_dev]),
              else: apply(Nx, op, [t_dev, u_dev])
          end)
        end

        # A number is the cached one-element buffer of its value: filled by
        # the first use.
        if layout == :number, do: run.()
        :ok = Nx.Vulkan.synchronize()
        before = Nx.Vulkan.stats().ops_enqueued
        got = run.()

        assert Nx.Vulkan.stats().ops_enqueued == before + 1,
               "#{op} of #{inspect(t)} and #{inspect(u)} (#{layout}) took more than one op"

        expected =
          if u_first, do: apply(Nx, op, [u_ref, t_ref]), else: apply(Nx, op, [t_ref, u_ref])

        # (A float number with an integer tensor gives f32, with a float
        # tensor that tensor's type.)
        assert got.type == if(layout == :number, do: Nx.Type.merge_number(u, 0.75), else: t)
        tol = %{{:f, 16} => 1.0e-3, {:bf, 16} => 8.0e-3}[got.type]
        assert_same(got, expected, tol)
      end
    end

    test "an integer operand that the integer result type holds is read as it is, in one op" do
      # {result type, the other operand's type}: Nx's promotion of the pair
      # is the result type, and every value of the other type is one of it.
      pairs = [
        {{:s, 64}, {:s, 32}},
        {{:s, 64}, {:u, 32}},
        {{:s, 32}, {:u, 8}},
        {{:s, 32}, {:s, 16}},
        {{:s, 16}, {:s, 8}},
        {{:u, 16}, {:u, 8}},
        {{:u, 64}, {:u, 16}}
      ]

      layouts = [:same, :row, :column, :transposed]

      ops = [
        :add,
        :subtract,
        :multiply,
        :max,
        :min,
        :bitwise_xor,
        :quotient,
        :remainder,
        :left_shift,
        :right_shift
      ]

      for {t, u} <- pairs, layout <- layouts, op <- ops, u_first <- [true, false] do
        # Shift amounts and divisors small and positive; other values of
        # either sign where the type has one.
        {lo, hi} =
          cond do
            op in [:left_shift, :right_shift] -> {0, 12}
            elem(u, 0) == :u -> {0, 200}
            true -> {-100, 100}
          end

        u_host =
          case layout do
            :row -> random({4}, :s32, {lo, hi})
            :column -> random({3, 1}, :s32, {lo, hi})
            :transposed -> random({4, 3}, :s32, {lo, hi})
            _ -> random({3, 4}, :s32, {lo, hi})
          end
          |> Nx.as_type(u)

        {tlo, thi} = if op in [:left_shift, :right_shift], do: {0, 12}, else: {1, 90}
        t_host = random({3, 4}, :s32, {tlo, thi}) |> Nx.as_type(t)
        # No zero divisors.
        u_host = Nx.select(Nx.equal(u_host, 0), Nx.tensor(3, type: u), u_host)
        u_dev = vk(u_host)
        u_dev = if layout == :transposed, do: Nx.transpose(u_dev), else: u_dev
        u_ref = if layout == :transposed, do: Nx.transpose(u_host), else: u_host
        t_dev = vk(t_host)

        :ok = Nx.Vulkan.synchronize()
        before = Nx.Vulkan.stats().ops_enqueued

        got =
          native(fn ->
            if u_first,
              do: apply(Nx, op, [u_dev, t_dev]),
              else: apply(Nx, op, [t_dev, u_dev])
          end)

        assert Nx.Vulkan.stats().ops_enqueued == before + 1,
               "#{op} of #{inspect(t)} and #{inspect(u)} (#{layout}) took more than one op"

        expected =
          if u_first, do: apply(Nx, op, [u_ref, t_host]), else: apply(Nx, op, [t_host, u_ref])

        assert got.type == t
        assert_same(got, expected)
      end
    end

    test "numbers and constants combine with any tensor type on the device" do
      for type <- [:f32, :f64, :s32] do
        a = random({2, 3}, type)
        assert_same(native(fn -> Nx.add(vk(a), 1) end), Nx.add(a, 1))
        assert_same(native(fn -> Nx.multiply(2, vk(a)) end), Nx.multiply(2, a))
        assert_same(native(fn -> Nx.subtract(vk(a), 1.5) end), Nx.subtract(a, 1.5))
      end

      # With Nx.Vulkan.Backend as default backend, numbers become device
      # constants (s64 scalars) that are converted by a fill.
      Nx.with_default_backend(VB, fn ->
        a = random({3}, :f32)
        got = native(fn -> vk(a) |> Nx.add(1) |> Nx.multiply(3) |> Nx.max(0) end)
        assert_same(got, a |> Nx.add(1) |> Nx.multiply(3) |> Nx.max(0))
        s = native(fn -> Nx.tensor(7) end)
        assert s.type == {:s, 64}

        assert_same(
          native(fn -> Nx.as_type(s, :f32) end),
          Nx.tensor(7.0, backend: Nx.BinaryBackend)
        )

        assert_same(
          native(fn -> Nx.broadcast(s, {2, 2}) end),
          Nx.broadcast(Nx.tensor(7, backend: Nx.BinaryBackend), {2, 2})
        )
      end)
    end

    test "numbers read by binary ops and comparisons are immediates; results stay independent" do
      x = random({5}, :f32)
      s = random({5}, :s32)
      before = Nx.Vulkan.Scalars.size()

      for _ <- 1..3 do
        r = native(fn -> Nx.add(vk(x), 2.75) end)
        assert_same(r, Nx.add(x, 2.75))
        assert Nx.backend_deallocate(r) == :ok
        # an integer literal (s64) converted to f32, and to s32
        assert_same(native(fn -> Nx.multiply(vk(x), 3) end), Nx.multiply(x, 3))
        assert_same(native(fn -> Nx.subtract(vk(s), 7) end), Nx.subtract(s, 7))
        assert_same(native(fn -> Nx.greater(vk(x), 0.5) end), Nx.greater(x, 0.5))
        assert_same(native(fn -> Nx.divide(1, vk(x)) end), Nx.divide(1, x))

        # The numbers as device constants (Vulkan the default backend), on
        # either side.
        on_device = fn fun -> native(fn -> Nx.with_default_backend(VB, fun) end) end
        assert_same(on_device.(fn -> Nx.divide(1, vk(x)) end), Nx.divide(1, x))
        assert_same(on_device.(fn -> Nx.subtract(2.75, vk(x)) end), Nx.subtract(2.75, x))
        assert_same(on_device.(fn -> Nx.subtract(vk(s), 7) end), Nx.subtract(s, 7))
        assert_same(on_device.(fn -> Nx.less(0.5, vk(x)) end), Nx.less(0.5, x))
      end

      # The values travel in the kernels' push constants: no cached buffer.
      assert Nx.Vulkan.Scalars.size() == before
      assert_same(native(fn -> Nx.add(vk(x), 2.75) end), Nx.add(x, 2.75))
      assert_same(native(fn -> Nx.clip(vk(x), -0.5, 0.5) end), Nx.clip(x, -0.5, 0.5))
      assert Nx.Vulkan.Scalars.size() == before

      # select reads numbers through the cache's buffers (one per value),
      # and compares a predicate of another type with an immediate zero.
      p = Nx.greater(x, 0.5)
      z = Nx.multiply(x, Nx.less(x, 0.0))

      for _ <- 1..3 do
        assert_same(native(fn -> Nx.select(vk(p), 1.0, 0.0) end), Nx.select(p, 1.0, 0.0))
        assert_same(native(fn -> Nx.select(vk(z), 2, vk(x)) end), Nx.select(z, 2, x))

        # The numbers as device constants (Vulkan the default backend), on
        # either side of a tensor.
        on_device = fn fun -> native(fn -> Nx.with_default_backend(VB, fun) end) end
        assert_same(on_device.(fn -> Nx.select(vk(p), 1.0, 0.0) end), Nx.select(p, 1.0, 0.0))
        assert_same(on_device.(fn -> Nx.select(vk(p), vk(x), 0) end), Nx.select(p, x, 0))
        assert_same(on_device.(fn -> Nx.select(vk(p), 2, vk(x)) end), Nx.select(p, 2, x))
      end

      assert Nx.Vulkan.Scalars.size() - before <= 3
    end

    # Small integral values of type (exact in every type) on the host.
    defp integral(shape, {:c, _} = type),
      do: Nx.complex(integral(shape, :f32), integral(shape, :f32)) |> Nx.as_type(type)

    defp integral(shape, {:u, _} = type), do: random(shape, :s32, {0, 9}) |> Nx.as_type(type)
    defp integral(shape, type), do: random(shape, :s32, {-9, 9}) |> Nx.as_type(type)

    test "numbers on either side of binary ops and comparisons, in every type" do
      types =
        [{:u, 8}, {:s, 8}, {:u, 16}, {:s, 16}, {:u, 32}, {:s, 32}, {:u, 64}, {:s, 64}] ++
          [{:f, 16}, {:bf, 16}, {:f, 32}, {:f, 64}, {:c, 64}, {:c, 128}]

      for type <- types, shape <- [{}, {3, 5}] do
        x = integral(shape, type)
        n = if elem(type, 0) == :c, do: Complex.new(2, -3), else: 3
        d = vk(x)

        for op <- [:add, :subtract, :multiply] ++ if(elem(type, 0) == :c, do: [], else: [:max]) do
          assert_same(native(fn -> apply(Nx, op, [d, n]) end), apply(Nx, op, [x, n]))
          assert_same(native(fn -> apply(Nx, op, [n, d]) end), apply(Nx, op, [n, x]))
        end

        cmps = if elem(type, 0) == :c, do: [:equal, :not_equal], else: [:less, :greater_equal]

        for op <- cmps, n <- [n, 0] do
          assert_same(native(fn -> apply(Nx, op, [d, n]) end), apply(Nx, op, [x, n]))
          assert_same(native(fn -> apply(Nx, op, [n, d]) end), apply(Nx, op, [n, x]))
        end

        # A tensor operand of the same value gives the same results.
        c = Nx.tensor(n, type: type, backend: Nx.BinaryBackend)

        assert_same(
          native(fn -> Nx.subtract(d, vk(c)) end),
          native(fn -> Nx.subtract(d, Nx.as_type(Nx.tensor(n, backend: VB), type)) end)
        )
      end
    end

    test "numbers Nx makes device constants, on either side, in f32, f64, s32 and s64" do
      # Nx.add(x, 1) with Vulkan the default backend: the number is a
      # constant without a buffer whose value goes straight into the
      # kernel, converted to the result's type (a float beyond f32's range
      # is infinity there, an integer rounds to f32's precision).
      on_device = fn fun -> native(fn -> Nx.with_default_backend(VB, fun) end) end
      before = Nx.Vulkan.Scalars.size()

      cases = [
        {{:f, 32}, [3, 2.75, -0.0, 1.0e-40, 1.0e39, 16_777_217]},
        {{:f, 64}, [3, 2.75, -0.0, 1.0e300, 9_007_199_254_740_993]},
        {{:s, 32}, [3, -7, 2_147_483_647, -2_147_483_648]},
        {{:s, 64}, [3, -7, 9_223_372_036_854_775_807]}
      ]

      for {type, numbers} <- cases, shape <- [{}, {3, 5}], n <- numbers do
        x =
          if type == {:s, 64},
            do: Nx.as_type(random(shape, :s32), type),
            else: random(shape, type)

        d = vk(x)
        ops = [:add, :subtract, :multiply, :max, :min]
        ops = if elem(type, 0) == :f, do: ops ++ [:divide, :atan2], else: ops
        # (the host reference raises dividing by zero)
        ops = if n == 0, do: ops -- [:divide], else: ops

        for op <- ops do
          # Sums, differences and extremes are exact in IEEE arithmetic,
          # but for a denormal number (a GPU may flush it) and for a number
          # f32 cannot hold (rounded to f32 first, as XLA does; the host
          # reference adds it in f64).
          exact = op in [:add, :subtract, :max, :min] and n not in [1.0e-40, 16_777_217]
          tol = if exact, do: 0, else: nil
          expected = apply(Nx, op, [x, n])
          got = on_device.(fn -> apply(Nx, op, [d, n]) end)
          assert got.type == expected.type, "#{op}(#{inspect(type)}, #{inspect(n)})"
          assert_same(got, expected, tol)
          assert_same(on_device.(fn -> apply(Nx, op, [n, d]) end), apply(Nx, op, [n, x]), tol)
        end
      end

      assert Nx.Vulkan.Scalars.size() == before
    end

    test "constants convert with the value of their type" do
      for {value, from, to} <- [
            {0.1, :f32, :f64},
            {16_777_217, :s64, :f32},
            {3_000_000_000, :s64, :s32},
            {-2.7, :f32, :s32},
            {:nan, :f32, :f64},
            {:infinity, :f32, :s32}
          ] do
        host_t = Nx.tensor(value, type: from, backend: Nx.BinaryBackend)
        got = native(fn -> Nx.as_type(Nx.tensor(value, type: from, backend: VB), to) end)
        assert Nx.to_binary(got) == Nx.to_binary(Nx.as_type(host_t, to))

        # Promotion converts the operand first, then computes in the output
        # type (as XLA does).
        if Nx.Type.merge(Nx.Type.normalize!(to), Nx.Type.normalize!(from)) ==
             Nx.Type.normalize!(to) do
          a = random({3}, to)
          got = native(fn -> Nx.add(vk(a), Nx.tensor(value, type: from, backend: VB)) end)
          assert Nx.to_binary(got) == Nx.to_binary(Nx.add(a, Nx.as_type(host_t, to)))
        end
      end
    end

    test "tensors of other backends are accepted as operands" do
      a = random({2, 3}, :f32)
      b = random({3}, :f32)
      got = native(fn -> Nx.add(vk(a), b) end)
      assert_same(got, Nx.add(a, b))
      got = native(fn -> Nx.multiply(b, vk(a)) end)
      assert_same(got, Nx.multiply(b, a))
    end

    test "as_type between f32, f64 and s32" do
      types = [:f32, :f64, :s32]

      for from <- types, to <- types, shape <- [{}, {5}, {3, 4}, {2, 1, 3}] do
        a = random(shape, from, if(from == :s32, do: nil, else: {-50.0, 50.0}))
        assert_same(native(fn -> Nx.as_type(vk(a), to) end), Nx.as_type(a, to))
      end

      special = Nx.tensor([:nan, :infinity, :neg_infinity, -3.7, 3.7], backend: Nx.BinaryBackend)
      assert_same(native(fn -> Nx.as_type(vk(special), :s32) end), Nx.as_type(special, :s32))
    end

    test "clip" do
      for type <- [:f32, :s32, :f64] do
        a = random({3, 4}, type)
        lo = Nx.tensor(-1, type: type)
        hi = Nx.tensor(2, type: type)
        assert_same(native(fn -> Nx.clip(vk(a), vk(lo), hi) end), Nx.clip(a, lo, hi))
      end
    end

    ## Layout

    test "reshape and squeeze are free" do
      t = vk(random({2, 3, 1}, :f32))
      r = Nx.reshape(t, {3, 2})
      s = Nx.squeeze(t)
      assert r.data.ref == t.data.ref
      assert s.data.ref == t.data.ref
      assert_same(r, Nx.reshape(host(t), {3, 2}))
      assert_same(s, Nx.squeeze(host(t)))
    end

    test "broadcast" do
      cases = [
        {{}, {2, 3}, nil},
        {{3}, {2, 3}, nil},
        {{3, 1}, {3, 4}, nil},
        {{3}, {3, 2}, [0]},
        {{2, 1, 3}, {4, 2, 5, 3}, nil},
        {{1}, {5}, nil},
        {{2, 3}, {2, 3}, nil},
        {{1, 1}, {3, 1, 4}, nil},
        {{3}, {3, 1}, [0]},
        {{2, 3}, {2, 1, 3, 1}, [0, 2]},
        {{2, 3}, {1, 2, 3}, nil}
      ]

      for type <- [:f32, :f64, :s32], {from, to, axes} <- cases do
        a = random(from, type)
        opts = if axes, do: [axes: axes], else: []
        assert_same(native(fn -> Nx.broadcast(vk(a), to, opts) end), Nx.broadcast(a, to, opts))
      end

      # Adding axes of size 1 only is a reshape: no device op.
      a = vk(random({2, 3}, :f32))
      Nx.Vulkan.synchronize()
      before = Nx.Vulkan.stats().ops_enqueued
      b = native(fn -> Nx.broadcast(a, {2, 1, 3, 1}, axes: [0, 2]) end)
      assert Nx.Vulkan.stats().ops_enqueued == before
      assert_same(b, Nx.broadcast(host(a), {2, 1, 3, 1}, axes: [0, 2]))
    end

    test "transpose" do
      cases = [
        {{2, 3}, nil},
        {{2, 3, 4}, [2, 0, 1]},
        {{2, 3, 4, 5}, [3, 1, 0, 2]},
        {{1, 3, 1}, [2, 1, 0]}
      ]

      for type <- [:f32, :f64, :s32], {shape, axes} <- cases do
        a = random(shape, type)
        opts = if axes, do: [axes: axes], else: []
        assert_same(native(fn -> Nx.transpose(vk(a), opts) end), Nx.transpose(a, opts))
      end
    end

    test "transposes and broadcasts are views: no device op; ops read them in place or copy them" do
      for type <- [:f32, :f64, :s32, :u8, :f16, :s64] do
        type = Nx.Type.normalize!(type)
        a = integral({3, 4, 5}, type)
        ht = Nx.transpose(a, axes: [2, 0, 1])
        va = vk(a)
        Nx.Vulkan.synchronize()
        before = Nx.Vulkan.stats().ops_enqueued
        t = native(fn -> Nx.transpose(va, axes: [2, 0, 1]) end)
        assert Nx.Vulkan.stats().ops_enqueued == before
        assert t.data.strides == [1, 20, 5]
        assert t.data.ref == va.data.ref
        assert_same(t, ht)

        # Transposed back: the dense layout again, the same buffer.
        back = native(fn -> Nx.transpose(t, axes: [1, 2, 0]) end)
        assert back.data.strides == nil
        assert_same(back, a)

        # A broadcast: stride 0 along the new and the size-1 axes.
        r = integral({5, 1, 4}, type)
        hb = Nx.broadcast(r, {5, 3, 4})
        vr = vk(r)
        Nx.Vulkan.synchronize()
        before = Nx.Vulkan.stats().ops_enqueued
        bv = native(fn -> Nx.broadcast(vr, {5, 3, 4}) end)
        assert Nx.Vulkan.stats().ops_enqueued == before
        assert bv.data.strides == [4, 0, 1]
        assert_same(bv, hb)

        # One kernel reads a view in place.
        Nx.Vulkan.synchronize()
        before = Nx.Vulkan.stats().ops_enqueued
        sum = native(fn -> Nx.add(t, bv) end)
        assert Nx.Vulkan.stats().ops_enqueued == before + 1
        assert_same(sum, Nx.add(ht, hb))

        # A transpose of a broadcast and a broadcast of a transpose.
        both = native(fn -> Nx.transpose(Nx.broadcast(t, {2, 5, 3, 4}), axes: [3, 1, 0, 2]) end)
        assert_same(both, Nx.transpose(Nx.broadcast(ht, {2, 5, 3, 4}), axes: [3, 1, 0, 2]))

        for {view, expected_view, what} <- [{t, ht, "transpose"}, {bv, hb, "broadcast"}] do
          check_view_ops(view, expected_view, type, what)
        end

        # Copies and transfers keep the layout.
        assert_same(Nx.backend_copy(t, VB), ht)
        assert_same(Nx.backend_copy(bv, VB), hb)
        assert Nx.to_binary(t) == Nx.to_binary(ht)
        assert Nx.to_binary(bv) == Nx.to_binary(hb)
        assert Nx.to_binary(t, limit: 7) == Nx.to_binary(ht, limit: 7)

        assert Nx.to_flat_list(Nx.backend_transfer(Nx.transpose(vk(a)), Nx.BinaryBackend)) ==
                 Nx.to_flat_list(Nx.transpose(a))

        # A vectorized view reads in the vectorized order.
        vt = Nx.vectorize(t, :rows)
        assert Nx.to_binary(vt) == Nx.to_binary(ht)
        assert_same(Nx.devectorize(Nx.add(vt, 1), keep_names: false), Nx.add(ht, 1))
      end

      # Through Nx.Vulkan.Compiler: a plan made for a dense argument is not
      # replayed for a view of the same shape, nor the other way round.
      jit = Nx.Defn.jit(&Nx.multiply(&1, 2), compiler: Nx.Vulkan.Compiler)
      a = random({4, 4}, :f32)
      assert_same(jit.(vk(a)), Nx.multiply(a, 2))
      assert_same(jit.(Nx.transpose(vk(a))), Nx.multiply(Nx.transpose(a), 2))
      assert_same(jit.(vk(a)), Nx.multiply(a, 2))

      assert_same(
        jit.(Nx.broadcast(vk(a[0]), {4, 4})),
        Nx.multiply(Nx.broadcast(a[0], {4, 4}), 2)
      )

      # A deallocated tensor's transpose or broadcast raises, as any other
      # use does.
      d = vk(a)
      Nx.backend_deallocate(d)
      assert_raise ArgumentError, fn -> Nx.transpose(d) end
      assert_raise ArgumentError, fn -> Nx.broadcast(d, {2, 4, 4}) end

      # Deallocating a view frees the buffer it views.
      d = vk(a)
      Nx.backend_deallocate(Nx.transpose(d))
      assert_raise ArgumentError, fn -> Nx.add(d, 1) end
    end

    # The ops on view (a {5, 3, 4} view of type type) against the same ops
    # on expected (its value on the host).
    defp check_view_ops(view, expected, type, what) do
      b = integral({5, 3, 4}, type)
      wide = integral({2, 5, 3, 4}, type)

      checks = [
        {"add a dense tensor", &Nx.add(&1, &2), [b]},
        {"subtract from a broadcast", &Nx.subtract(&2, &1), [wide]},
        {"multiply by a number", &Nx.multiply(&1, 3), []},
        {"a number minus it", &Nx.subtract(2, &1), []},
        {"max", &Nx.max(&1, &2), [b]},
        {"negate", &Nx.negate/1, []},
        {"abs", &Nx.abs/1, []},
        {"greater", &Nx.greater(&1, 2), []},
        {"equal", &Nx.equal(&1, &2), [b]},
        {"select", &Nx.select(Nx.greater(&1, 0), &1, &2), [b]},
        {"select numbers", &Nx.select(&1, 1, 0), []},
        {"clip", &Nx.clip(&1, 1, 5), []},
        {"sum of an axis", &Nx.sum(&1, axes: [1]), []},
        {"sum", &Nx.sum/1, []},
        {"reduce_max", &Nx.reduce_max(&1, axes: [0, 2]), []},
        {"argmax", &Nx.argmax(&1, axis: 1), []},
        {"as_type", &Nx.as_type(&1, :f32), []},
        {"as_type s64", &Nx.as_type(&1, :s64), []},
        {"dot", &Nx.dot(&1, [2], &2, [2]), [b]},
        {"dot, contracting a stride-0 axis", &Nx.dot(&1, [1], &2, [1]), [b]},
        {"dot, batched", &Nx.dot(&1, [2], [0], &2, [2], [0]), [b]},
        {"slice", &Nx.slice(&1, [1, 0, 1], [3, 2, 3]), []},
        {"slice with strides", &Nx.slice(&1, [0, 0, 0], [5, 3, 4], strides: [2, 1, 3]), []},
        {"reverse", &Nx.reverse(&1, axes: [0, 2]), []},
        {"reshape", &Nx.reshape(&1, {15, 4}), []},
        {"squeeze a new axis", &Nx.squeeze(Nx.new_axis(&1, 1)), []},
        {"broadcast", &Nx.broadcast(&1, {2, 5, 3, 4}), []},
        {"negative padding", &Nx.pad(&1, 0, [{-1, 0, 0}, {0, -1, 0}, {-2, -1, 0}]), []},
        {"padding", &Nx.pad(&1, 7, [{1, 0, 1}, {0, 2, 0}, {-1, 1, 0}]), []},
        {"concatenate", &Nx.concatenate([&1, &2, &1], axis: 1), [b]},
        {"put_slice", &Nx.put_slice(&2, [1, 0, 1], Nx.slice(&1, [0, 0, 0], [2, 3, 2])), [b]},
        {"gather", &Nx.gather(&1, Nx.tensor([[1, 2, 3], [4, 0, 0]])), []},
        {"window_sum", &Nx.window_sum(&1, {2, 1, 2}), []},
        {"bitcast", &Nx.bitcast(&1, bitcast_type(type)), []},
        {"transpose again", &Nx.transpose(&1, axes: [1, 0, 2]), []}
      ]

      for {name, fun, args} <- checks do
        want = apply(fun, [expected | args])
        got = native(fn -> apply(fun, [view | Enum.map(args, &vk/1)]) end)

        try do
          assert_same(got, want, if(elem(type, 0) == :f, do: 2.0e-3, else: nil))
        rescue
          e in ExUnit.AssertionError ->
            message = "#{inspect(type)} #{what}, #{name}: #{e.message}"
            reraise %{e | message: message}, __STACKTRACE__
        end
      end
    end

    # A type of the same size to bitcast type to.
    defp bitcast_type({:f, bits}), do: {:s, bits}
    defp bitcast_type({:u, bits}), do: {:s, bits}
    defp bitcast_type({:s, bits}), do: {:u, bits}

    test "slice with strides, tensor start indices and clamping" do
      for type <- [:f32, :f64, :s32] do
        a = random({5, 6, 4}, type)

        for {starts, lengths, opts} <- [
              {[0, 0, 0], [5, 6, 4], []},
              {[1, 2, 0], [3, 3, 4], []},
              {[0, 1, 1], [5, 5, 3], [strides: [2, 2, 1]]},
              {[4, 5, 3], [2, 2, 2], []},
              {[0, 0, 0], [5, 6, 4], [strides: [3, 1, 2]]}
            ] do
          assert_same(
            native(fn -> Nx.slice(vk(a), starts, lengths, opts) end),
            Nx.slice(a, starts, lengths, opts)
          )
        end

        starts = [Nx.tensor(1), vk(Nx.tensor(2)), 1]

        assert_same(
          native(fn -> Nx.slice(vk(a), starts, [2, 3, 2]) end),
          Nx.slice(a, [1, 2, 1], [2, 3, 2])
        )

        assert_same(
          native(fn -> Nx.slice_along_axis(vk(a), 1, 3, axis: 1) end),
          Nx.slice_along_axis(a, 1, 3, axis: 1)
        )
      end
    end

    test "reverse and negative padding" do
      for type <- [:f32, :s32] do
        a = random({3, 4, 5}, type)

        for axes <- [[0], [1], [2], [0, 2], [0, 1, 2]] do
          assert_same(native(fn -> Nx.reverse(vk(a), axes: axes) end), Nx.reverse(a, axes: axes))
        end

        config = [{-1, 0, 0}, {0, -2, 0}, {-1, -1, 0}]
        assert_same(native(fn -> Nx.pad(vk(a), 0, config) end), Nx.pad(a, 0, config))
        # Positive padding runs on the host.
        assert_same(
          Nx.pad(vk(a), 0, [{1, 2, 1}, {0, 0, 0}, {0, 1, 0}]),
          Nx.pad(a, 0, [{1, 2, 1}, {0, 0, 0}, {0, 1, 0}])
        )
      end
    end

    test "ops on sliced, transposed and reversed inputs" do
      a = random({4, 6}, :f32)
      b = random({6, 4}, :f32)

      got =
        native(fn ->
          x = vk(a) |> Nx.slice([1, 0], [2, 6], strides: [2, 1])
          y = vk(b) |> Nx.transpose() |> Nx.reverse(axes: [1]) |> Nx.slice([0, 0], [2, 6])
          x |> Nx.multiply(y) |> Nx.add(Nx.exp(x)) |> Nx.sum(axes: [1])
        end)

      x = a |> Nx.slice([1, 0], [2, 6], strides: [2, 1])
      y = b |> Nx.transpose() |> Nx.reverse(axes: [1]) |> Nx.slice([0, 0], [2, 6])
      assert_same(got, x |> Nx.multiply(y) |> Nx.add(Nx.exp(x)) |> Nx.sum(axes: [1]), 1.0e-5)
    end

    ## Reductions

    test "sum, product, reduce_max and reduce_min over axes, with keep_axes" do
      cases = [
        {{}, nil},
        {{7}, nil},
        {{7}, [0]},
        {{3, 4}, [0]},
        {{3, 4}, [1]},
        {{3, 4}, [-1]},
        {{2, 3, 4}, [0, 2]},
        {{2, 3, 2, 2}, [1, 2, 3]},
        {{2, 3, 2, 2}, nil},
        {{3, 1, 2}, [1]},
        {{3, 4}, []}
      ]

      for type <- [:f32, :f64],
          op <- [:sum, :product, :reduce_max, :reduce_min],
          {shape, axes} <- cases,
          keep <- [false, true] do
        a = random(shape, type, {-2.0, 2.0})
        opts = [keep_axes: keep] ++ if(axes, do: [axes: axes], else: [])

        assert_same(
          native(fn -> apply(Nx, op, [vk(a), opts]) end),
          apply(Nx, op, [a, opts]),
          1.0e-5
        )
      end

      for op <- [:reduce_max, :reduce_min], {shape, axes} <- cases, keep <- [false, true] do
        a = random(shape, :s32)
        opts = [keep_axes: keep] ++ if(axes, do: [axes: axes], else: [])
        assert_same(native(fn -> apply(Nx, op, [vk(a), opts]) end), apply(Nx, op, [a, opts]))
      end

      # The sum of s32 is s64 in Nx.
      a = random({3, 4}, :s32)
      assert_same(native(fn -> Nx.sum(vk(a), axes: [1]) end), Nx.sum(a, axes: [1]))
    end

    test "sums and products of narrow integers read them widened, in one device op" do
      cases = [
        {{300}, nil},
        {{3, 100}, [1]},
        {{100, 12}, [0]},
        {{2, 3, 4}, [0, 2]},
        {{4, 5}, []}
      ]

      for {kind, bits} <- [s: 8, s: 16, s: 32, u: 8, u: 16, u: 32],
          op <- [:sum, :product],
          {shape, axes} <- cases do
        # Elements over the type's whole range: sums past 32 bits, products
        # that wrap modulo 2^64 (as Nx.BinaryBackend's do).
        a =
          for _ <- 1..Tuple.product(shape)//1, into: <<>> do
            <<:rand.uniform(Bitwise.bsl(1, bits)) - 1::size(bits)-native>>
          end
          |> Nx.from_binary({kind, bits}, backend: Nx.BinaryBackend)
          |> Nx.reshape(shape)

        opts = if axes, do: [axes: axes], else: []
        t = vk(a)
        before = Nx.Vulkan.stats().ops_enqueued
        got = native(fn -> apply(Nx, op, [t, opts]) end)
        assert Nx.Vulkan.stats().ops_enqueued == before + 1
        assert got.type == {kind, 64}
        assert_same(got, apply(Nx, op, [a, opts]))
      end
    end

    test "mean and softmax-like compositions" do
      a = random({4, 5}, :f32)

      got =
        native(fn ->
          t = vk(a)
          e = Nx.exp(Nx.subtract(t, Nx.reduce_max(t, axes: [1], keep_axes: true)))
          Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true))
        end)

      e = Nx.exp(Nx.subtract(a, Nx.reduce_max(a, axes: [1], keep_axes: true)))
      assert_same(got, Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true)), 1.0e-5)
      assert_same(native(fn -> Nx.mean(vk(a), axes: [0]) end), Nx.mean(a, axes: [0]))
    end

    ## Dot

    @dot_cases [
      # {left shape, contract, batch, right shape, contract, batch}
      {{5}, [0], [], {5}, [0], []},
      {{2, 3}, [1], [], {3}, [0], []},
      {{3}, [0], [], {3, 4}, [0], []},
      {{2, 3}, [1], [], {3, 4}, [0], []},
      {{3, 2}, [0], [], {3, 4}, [0], []},
      {{3, 2}, [0], [], {4, 3}, [1], []},
      {{2, 3}, [1], [], {4, 3}, [1], []},
      {{3}, [], [], {4}, [], []},
      {{5, 2, 3}, [2], [0], {5, 3, 4}, [1], [0]},
      {{5, 3, 2}, [1], [0], {5, 4, 3}, [2], [0]},
      {{5, 3, 2}, [1], [0], {5, 3, 4}, [1], [0]},
      {{2, 3, 4}, [1, 2], [], {3, 4, 5}, [0, 1], []},
      {{2, 3, 4}, [2, 1], [], {4, 3, 5}, [0, 1], []},
      {{2, 3, 4}, [0, 2], [], {4, 5, 2}, [2, 0], []},
      {{2, 4, 3, 3}, [3], [0, 1], {2, 4, 3, 5}, [2], [0, 1]},
      {{2, 4, 3, 3}, [2], [0, 1], {2, 4, 5, 3}, [3], [0, 1]},
      {{1, 3}, [1], [], {3, 1}, [0], []},
      {{4, 1, 3}, [2], [0], {4, 3, 1}, [1], [0]}
    ]

    for type <- [:f32, :f64, :s32] do
      test "dot with contraction and batch axes on #{type}" do
        type = unquote(type)

        for {ls, c1, b1, rs, c2, b2} <- @dot_cases do
          a = random(ls, type, if(type == :s32, do: {-20, 20}, else: nil))
          b = random(rs, type, if(type == :s32, do: {-20, 20}, else: nil))
          expected = Nx.dot(a, c1, b1, b, c2, b2)
          got = native(fn -> Nx.dot(vk(a), c1, b1, vk(b), c2, b2) end)
          assert_same(got, expected, if(type == :f32, do: 1.0e-5))
        end
      end
    end

    test "dot with mixed types and strided inputs" do
      a = random({3, 4}, :s32)
      b = random({4, 2}, :f32)
      assert_same(native(fn -> Nx.dot(vk(a), vk(b)) end), Nx.dot(a, b), 1.0e-5)

      c = random({6, 8}, :f32)

      got =
        native(fn ->
          vk(c) |> Nx.slice([0, 0], [6, 8], strides: [2, 1]) |> Nx.dot(Nx.transpose(vk(c)))
        end)

      expected = c |> Nx.slice([0, 0], [6, 8], strides: [2, 1]) |> Nx.dot(Nx.transpose(c))
      assert_same(got, expected, 1.0e-5)

      big_a = random({64, 96}, :f32)
      big_b = random({96, 33}, :f32)
      assert_same(native(fn -> Nx.dot(vk(big_a), vk(big_b)) end), Nx.dot(big_a, big_b), 1.0e-4)
    end

    test "empty tensors (newer Nx versions have them) through the callbacks" do
      # Nx 0.7 rejects zero dimensions before reaching the backend; newer
      # versions pass them on. The callbacks are called directly here.
      f32 = {:f, 32}

      out = fn shape ->
        %Nx.Tensor{type: f32, shape: shape, names: List.duplicate(nil, tuple_size(shape))}
      end

      e = VB.from_binary(out.({0, 3}), "", [])
      row = vk(Nx.tensor([1.0, 2.0, 3.0]))

      native(fn ->
        assert VB.to_binary(VB.add(out.({0, 3}), e, row), 0) == ""
        assert VB.to_binary(VB.exp(out.({0, 3}), e), 0) == ""
        assert VB.to_binary(VB.transpose(out.({3, 0}), e, [1, 0]), 0) == ""
        assert VB.to_binary(VB.slice(out.({0, 2}), e, [0, 1], [0, 2], [1, 1]), 0) == ""
        assert VB.to_binary(VB.broadcast(out.({2, 0, 3}), e, {2, 0, 3}, [1, 2]), 0) == ""
        assert VB.to_binary(VB.as_type(%{out.({0, 3}) | type: {:s, 32}}, e), 0) == ""

        sum = VB.sum(out.({3}), e, axes: [0], keep_axes: false)
        assert Nx.to_flat_list(sum) == [0.0, 0.0, 0.0]
        max = VB.reduce_max(out.({3}), e, axes: [0], keep_axes: false)
        assert Nx.to_flat_list(max) == [:neg_infinity, :neg_infinity, :neg_infinity]

        # A contraction over an empty axis is zeros.
        a = VB.from_binary(out.({2, 0}), "", [])
        b = VB.from_binary(out.({0, 3}), "", [])
        dot = VB.dot(out.({2, 3}), a, [1], [], b, [0], [])
        assert Nx.to_flat_list(dot) == List.duplicate(0.0, 6)
        empty_dot = VB.dot(out.({0, 0}), b, [1], [], e, [1], [])
        assert VB.to_binary(empty_dot, 0) == ""
      end)
    end

    ## Creation

    test "iota, eye and constant" do
      for type <- [:f32, :f64, :s32],
          shape <- [{}, {5}, {2, 3}, {2, 3, 4}],
          axis <- [nil, 0, -1] do
        opts = [type: type] ++ if(axis && shape != {}, do: [axis: axis], else: [])

        assert_same(
          native(fn -> Nx.iota(shape, [backend: VB] ++ opts) end),
          Nx.iota(shape, [backend: Nx.BinaryBackend] ++ opts)
        )
      end

      for type <- [:f32, :f64, :s32],
          shape <- [{3, 3}, {2, 4}, {4, 2}, {2, 3, 3}, {1, 1}, {1, 5}] do
        assert_same(
          native(fn -> Nx.eye(shape, type: type, backend: VB) end),
          Nx.eye(shape, type: type, backend: Nx.BinaryBackend)
        )
      end

      for {value, type} <- [
            {1.5, :f32},
            {-2, :s32},
            {:nan, :f32},
            {:infinity, :f64},
            {7, :s64},
            {3, :u8},
            {1.25, :f16},
            {1.25, :bf16},
            {Complex.new(1, 2), :c64},
            {Complex.new(-1, 0.5), :c128}
          ] do
        got = native(fn -> Nx.broadcast(Nx.tensor(value, type: type, backend: VB), {2, 3}) end)
        expected = Nx.broadcast(Nx.tensor(value, type: type, backend: Nx.BinaryBackend), {2, 3})
        assert Nx.to_binary(got) == Nx.to_binary(expected)
      end
    end

    test "from_binary and to_binary with a limit" do
      for type <- [:f32, :s64, :u8, :f16, :c64] do
        t = Nx.iota({100}, type: type, backend: Nx.BinaryBackend)
        d = vk(t)
        assert Nx.to_binary(d) == Nx.to_binary(t)
        assert Nx.to_binary(d, limit: 7) == Nx.to_binary(t, limit: 7)
        assert Nx.to_binary(d, limit: 0) == ""
      end

      # Above the dirty-upload threshold.
      big = random({300_000}, :f32)
      assert Nx.to_binary(vk(big)) == Nx.to_binary(big)
    end

    test "to_batched, with leftover" do
      t = random({7, 3}, :f32)

      for leftover <- [:repeat, :discard] do
        got = vk(t) |> Nx.to_batched(2, leftover: leftover) |> Enum.to_list()
        expected = t |> Nx.to_batched(2, leftover: leftover) |> Enum.to_list()
        assert length(got) == length(expected)
        Enum.zip(got, expected) |> Enum.each(fn {g, e} -> assert_same(g, e) end)
      end

      native(fn -> vk(t) |> Nx.to_batched(2, leftover: :discard) |> Enum.to_list() end)
      native(fn -> vk(t) |> Nx.to_batched(2, leftover: :repeat) |> Enum.to_list() end)

      # A wrap-around batch spanning several rows, every type.
      for type <- [:u8, :s64, :f16, :c64, :c128] do
        t = Nx.iota({5, 2}, type: type, backend: Nx.BinaryBackend)
        got = vk(t) |> Nx.to_batched(4, leftover: :repeat) |> Enum.to_list()
        expected = t |> Nx.to_batched(4, leftover: :repeat) |> Enum.to_list()
        Enum.zip(got, expected) |> Enum.each(fn {g, e} -> assert_same(g, e) end)
      end
    end

    ## Memory and transfer

    test "backend_deallocate: :ok, then :already_deallocated, and later use raises" do
      t = vk(random({4}, :f32))
      assert Nx.backend_deallocate(t) == :ok
      assert Nx.backend_deallocate(t) == :already_deallocated
      assert_raise ArgumentError, fn -> Nx.to_binary(t) end
      assert_raise ArgumentError, fn -> Nx.add(t, t) end
      assert_raise ArgumentError, fn -> Nx.sort(t) end

      # a single uploaded element (its value known) read in its own type,
      # and in another (converted through the scalar cache)
      c = Nx.from_binary(<<3.0::float-32-native>>, :f32, backend: VB) |> Nx.reshape({})
      assert Nx.backend_deallocate(c) == :ok
      assert_raise ArgumentError, fn -> Nx.add(c, Nx.tensor([1.0, 2.0], backend: VB)) end

      i = Nx.from_binary(<<3::signed-64-native>>, :s64, backend: VB) |> Nx.reshape({})
      assert Nx.backend_deallocate(i) == :ok
      assert_raise ArgumentError, fn -> Nx.add(Nx.tensor([1.0, 2.0], backend: VB), i) end
    end

    test "one-element constants hold no device buffer and read back exactly" do
      dev = Nx.Vulkan.default_device_index()
      vec = random({5}, :f32)
      before = Nx.Vulkan.stats(dev)

      values = [0, 1, -7, 2.5, -0.0, 1.0e30, 1.0e300, 16_777_217, :nan, :infinity, :neg_infinity]

      for type <- [:f32, :f64, :s32, :s64, :u8, :f16, :bf16, :s8, :u32, :c64],
          value <- values,
          is_number(value) or elem(Nx.Type.normalize!(type), 0) in [:f, :bf, :c],
          not (is_float(value) and elem(Nx.Type.normalize!(type), 0) in [:s, :u]) do
        host_c = Nx.tensor(value, type: type, backend: Nx.BinaryBackend)
        # Nx.tensor/2 makes non-finite scalars with from_binary/3
        c = VB.constant(%Nx.Tensor{shape: {}, type: host_c.type, names: []}, value, [])
        assert c.data.ref == nil
        assert Nx.to_binary(c) == Nx.to_binary(host_c), "#{inspect(value)} as #{type}"

        # free views and conversions stay without a buffer
        r = native(fn -> Nx.reshape(c, {1, 1}) end)
        assert r.data.ref == nil and Nx.to_binary(r) == Nx.to_binary(host_c)

        # (Nx.BinaryBackend cannot truncate a non-finite complex number)
        for to <- [:f32, :f64, :s32, :s64, :u8, :f16, :c64],
            not (type == :c64 and to in [:s32, :s64, :u8] and
                   not is_number(Nx.to_number(Nx.real(host_c)))) do
          got = native(fn -> Nx.as_type(c, to) end)
          assert Nx.to_binary(got) == Nx.to_binary(Nx.as_type(host_c, to)), "#{type} -> #{to}"
        end

        assert Nx.backend_copy(c, Nx.BinaryBackend) == host_c
        assert Nx.backend_copy(c, VB).data.ref == nil
        assert Nx.backend_deallocate(c) == :ok
        assert Nx.to_binary(c) == Nx.to_binary(host_c)
      end

      # nothing above allocated or queued device work
      after_ = Nx.Vulkan.stats(dev)
      assert after_.pool_allocations == before.pool_allocations
      assert after_.ops_enqueued == before.ops_enqueued

      # read by kernels: as an operand of each type, broadcast, and dense
      for type <- [:f32, :f64, :s32, :s64, :u8, :f16, :bf16, :c64] do
        a = random({5}, :f64, {0.0, 100.0}) |> Nx.as_type(type)
        c = Nx.tensor(3, type: type, backend: VB)
        host_c = Nx.tensor(3, type: type, backend: Nx.BinaryBackend)
        assert_same(native(fn -> Nx.subtract(vk(a), c) end), Nx.subtract(a, host_c))
        assert_same(native(fn -> Nx.multiply(c, vk(a)) end), Nx.multiply(host_c, a))
        assert_same(native(fn -> Nx.add(c, c) end), Nx.add(host_c, host_c))
        assert_same(native(fn -> Nx.broadcast(c, {2, 3}) end), Nx.broadcast(host_c, {2, 3}))
        assert_same(native(fn -> Nx.negate(c) end), Nx.negate(host_c))
      end

      # bitcast keeps the bits (a NaN payload included)
      nan = Nx.bitcast(Nx.tensor(0x7FC00001, type: :u32, backend: VB), :f32)
      assert Nx.to_binary(Nx.bitcast(nan, :u32)) == <<0x7FC00001::32-native>>
      assert_same(native(fn -> Nx.add(vk(vec), Nx.tensor(0.5)) end), Nx.add(vec, 0.5))
    end

    # Every integer type's edge values and a few others, as Elixir integers.
    defp int_values({:s, bits}) do
      max = Bitwise.bsl(1, bits - 1) - 1
      [0, 1, -1, 2, -3, 7, max, -max - 1, max - 1, -max, div(max, 3), -div(max, 5)]
    end

    defp int_values({:u, bits}) do
      max = Bitwise.bsl(1, bits) - 1
      [0, 1, 2, 3, 7, max, max - 1, div(max, 2), div(max, 2) + 1, div(max, 3)]
    end

    defp fits?(v, {:s, bits}), do: v >= -Bitwise.bsl(1, bits - 1) and v < Bitwise.bsl(1, bits - 1)
    defp fits?(v, {:u, bits}), do: v >= 0 and v < Bitwise.bsl(1, bits)

    # A one-element constant without a buffer, as Nx makes from a number.
    defp known(value, type) do
      t = VB.constant(%Nx.Tensor{shape: {}, type: Nx.Type.normalize!(type), names: []}, value, [])
      assert t.data.ref == nil
      t
    end

    # op on one-element constants of types ta and tb for every pair of
    # values of vas and vbs: each result must equal the device's for the
    # same pair (all pairs at once, from uploaded operands, which are not
    # constants); check.(x, y, device_value, got, what) asserts the rest.
    # Returns the device ops the constant pairs queued.
    defp known_pairs(op, ta, tb, vas, vbs, check) do
      dev = Nx.Vulkan.default_device_index()
      pairs = for x <- vas, y <- vbs, do: {x, y}
      {xs, ys} = Enum.unzip(pairs)
      dx = Nx.tensor(xs, type: ta, backend: VB)
      dy = Nx.tensor(ys, type: tb, backend: VB)
      device = native(fn -> apply(Nx, op, [dx, dy]) end) |> Nx.to_flat_list()

      Nx.Vulkan.synchronize(dev)
      before = Nx.Vulkan.stats(dev)

      for {{x, y}, d} <- Enum.zip(pairs, device) do
        got = native(fn -> apply(Nx, op, [known(x, ta), known(y, tb)]) end)
        what = "#{op}(#{x} :: #{inspect(ta)}, #{y} :: #{inspect(tb)})"
        assert Nx.to_number(got) == d, "#{what}: #{Nx.to_number(got)}, device #{d}"
        check.(x, y, d, got, what)
      end

      Nx.Vulkan.stats(dev).ops_enqueued - before.ops_enqueued
    end

    test "integer arithmetic and comparisons of one-element constants run on the host, as the device computes them" do
      int_types = [s: 8, s: 16, s: 32, s: 64, u: 8, u: 16, u: 32, u: 64]

      int_ops =
        [:add, :subtract, :multiply, :min, :max, :bitwise_and, :bitwise_or, :bitwise_xor] ++
          [:quotient, :remainder]

      # The operand types of one binary op: each type with itself, and
      # pairs whose result type converts (wraps) one of them.
      pairs =
        Enum.map(int_types, &{&1, &1}) ++
          [{{:s, 8}, {:s, 64}}, {{:u, 32}, {:s, 64}}, {{:u, 64}, {:s, 64}}, {{:u, 8}, {:s, 8}}]

      for {ta, tb} <- pairs, op <- int_ops do
        ops =
          known_pairs(op, ta, tb, int_values(ta), int_values(tb), fn x, y, d, got, what ->
            assert got.type == Nx.Type.merge(ta, tb)

            # The value kept is the one stored (later ops read it).
            if y != 0 or op not in [:quotient, :remainder] do
              assert got.data.ref == nil and got.data.value === d, what
            end

            # Nx.BinaryBackend agrees where the operands fit the result
            # type (it computes with them unconverted).
            if (y != 0 or op not in [:quotient, :remainder]) and fits?(x, got.type) and
                 fits?(y, got.type) do
              hx = Nx.tensor(x, type: ta, backend: Nx.BinaryBackend)
              hy = Nx.tensor(y, type: tb, backend: Nx.BinaryBackend)
              assert Nx.to_binary(got) == Nx.to_binary(apply(Nx, op, [hx, hy])), what
            end
          end)

        # Only the quotients and remainders by zero went to the device.
        if op in [:quotient, :remainder], do: assert(ops > 0), else: assert(ops == 0)
      end

      # Comparisons and logical ops: integers against integers (wrapped
      # into the compared type), floats against floats, small integers
      # against floats; f16 and integers too wide for a float are
      # compared on the device.
      floats = [0.0, -0.0, 1.5, -2.25, 0.1, 1.0e30, -3.0e38, 16_777_216.0]

      cmp_cases = [
        {{:s, 32}, {:s, 32}, int_values({:s, 32}), int_values({:s, 32}), true},
        {{:s, 64}, {:u, 64}, int_values({:s, 64}), int_values({:u, 64}), true},
        {{:u, 8}, {:s, 8}, int_values({:u, 8}), int_values({:s, 8}), true},
        {{:f, 32}, {:f, 32}, floats, floats, true},
        {{:f, 64}, {:f, 64}, [1.0e300, 0.1 | floats], floats, true},
        {{:f, 32}, {:f, 64}, floats, [0.1, 1.0e300 | floats], true},
        {{:s, 32}, {:f, 32}, [0, -1, 3, 16_777_216], floats, true},
        {{:s, 64}, {:f, 64}, [16_777_217, -9_007_199_254_740_993], [1.5, 16_777_216.0], false},
        {{:f, 16}, {:f, 16}, [0.5, -2.0, 0.0], [0.5, 1.0], false}
      ]

      cmp_ops =
        [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal] ++
          [:logical_and, :logical_or, :logical_xor]

      for {ta, tb, vas, vbs, on_host} <- cmp_cases, op <- cmp_ops do
        ops =
          known_pairs(op, ta, tb, vas, vbs, fn x, y, d, got, what ->
            assert got.type == {:u, 8}
            merged = Nx.Type.merge(ta, tb)

            # Nx.BinaryBackend compares integers unconverted: it agrees
            # where they fit the merged type.
            if Nx.Type.float?(merged) or (fits?(x, merged) and fits?(y, merged)) do
              hx = Nx.tensor(x, type: ta, backend: Nx.BinaryBackend)
              hy = Nx.tensor(y, type: tb, backend: Nx.BinaryBackend)
              assert Nx.to_binary(got) == Nx.to_binary(apply(Nx, op, [hx, hy])), what
            end

            if on_host, do: assert(got.data.ref == nil and got.data.value === d, what)
          end)

        if on_host, do: assert(ops == 0), else: assert(ops > 0)
      end

      # Not-a-number and infinities, and float arithmetic, stay on the device.
      nan = VB.constant(%Nx.Tensor{shape: {}, type: {:f, 32}, names: []}, :nan, [])
      one = known(1.0, :f32)
      assert Nx.to_number(native(fn -> Nx.equal(nan, nan) end)) == 0
      assert Nx.to_number(native(fn -> Nx.not_equal(nan, one) end)) == 1
      assert native(fn -> Nx.add(one, one) end).data.ref != nil
      assert native(fn -> Nx.left_shift(known(1, :s32), known(3, :s32)) end).data.ref != nil
    end

    defmodule Loops do
      @moduledoc false
      import Nx.Defn

      # A loop on a counter, a conditional on it, and a loop over a
      # tensor's rows (a counter Nx adds itself).
      defn count(x) do
        {_, x} =
          while {i = 0, x}, i < 10 do
            x = if rem(i, 2) == 0, do: x + i, else: x - 1
            {i + 1, x}
          end

        while x, r <- Nx.tensor([1.0, 2.0, 3.0]) do
          x * r
        end
      end
    end

    test "one element of a host tensor sliced on the device's behalf is a constant: no upload" do
      dev = Nx.Vulkan.default_device_index()

      for type <- [:u8, :s16, :s64, :u64, :f16, :bf16, :f32, :f64, :c64] do
        h = Nx.iota({2, 3}, type: type, backend: Nx.BinaryBackend) |> Nx.multiply(7)

        for {start, len} <- [{[1, 2], [1, 1]}, {[0, 0], [1, 1]}, {[1, 0], [1, 1]}] do
          starts = Enum.map(start, &known(&1, :s64))
          expected = Nx.slice(h, start, len)
          out = %{expected | data: nil}
          before = Nx.Vulkan.stats(dev)
          got = native(fn -> VB.slice(out, h, starts, len, [1, 1]) end)
          assert Nx.Vulkan.stats(dev).ops_enqueued == before.ops_enqueued
          assert got.data.ref == nil, "#{type} #{inspect(start)}"
          assert Nx.to_binary(got) == Nx.to_binary(expected), "#{type} #{inspect(start)}"
        end

        # More than one element: a device copy, as before.
        expected = Nx.slice(h, [0, 1], [2, 2])
        got = native(fn -> VB.slice(%{expected | data: nil}, h, [0, 1], [2, 2], [1, 1]) end)
        assert got.data.ref != nil
        assert Nx.to_binary(got) == Nx.to_binary(expected)
      end
    end

    test "a defn loop on a counter under Nx.Defn.Evaluator reads nothing back from the device" do
      dev = Nx.Vulkan.default_device_index()
      x = Nx.tensor([1.0, 2.0], backend: VB)
      expected = Loops.count(Nx.backend_copy(x, Nx.BinaryBackend))
      f = Nx.Defn.jit(&Loops.count/1, compiler: Nx.Defn.Evaluator)

      # With this backend the default, the loop's constants and counters
      # are its tensors: the counters' arithmetic and conditions stay on
      # the host, and so do the rows, one element of a host tensor each:
      # the device runs x's 13 ops.
      Nx.with_default_backend(VB, fn ->
        f.(x)
        Nx.Vulkan.synchronize(dev)
        before = Nx.Vulkan.stats(dev)
        got = native(fn -> f.(x) end)
        after_ = Nx.Vulkan.stats(dev)
        assert after_.download_wait.count == before.download_wait.count
        assert after_.reads_in_place == before.reads_in_place
        assert after_.ops_enqueued - before.ops_enqueued == 13
        assert_same(got, expected)
      end)
    end

    test "constants of more elements are views of one cached element: no device op" do
      dev = Nx.Vulkan.default_device_index()

      for {value, type} <- [
            {2.5, :f32},
            {-3, :s32},
            {7, :u8},
            {1.25, :f16},
            {0.5, :f64},
            {:nan, :f32}
          ] do
        host = Nx.broadcast(Nx.tensor(value, type: type, backend: Nx.BinaryBackend), {3, 4})
        out = %Nx.Tensor{shape: {3, 4}, type: host.type, names: [nil, nil]}
        elem_size = div(elem(host.type, 1), 8)
        # (the first use of a value fills its cached element; Nx.tensor/2
        # uploads non-finite numbers)
        _ = VB.constant(out, value, [])
        scalar = Nx.tensor(value, type: type, backend: VB)
        before = Nx.Vulkan.stats(dev).ops_enqueued
        c = native(fn -> VB.constant(out, value, []) end)
        b = native(fn -> Nx.broadcast(scalar, {3, 4}) end)
        t = native(fn -> Nx.transpose(b) end)
        r = native(fn -> Nx.reshape(c, {2, 1, 6}) end)
        assert Nx.Vulkan.stats(dev).ops_enqueued == before, "#{type}"
        assert c.data.strides == [0, 0] and r.data.strides == [0, 0, 0]

        assert Nx.to_binary(c) == Nx.to_binary(host)
        assert Nx.to_binary(b) == Nx.to_binary(host)
        assert Nx.to_binary(t) == Nx.to_binary(Nx.transpose(host))
        assert Nx.to_binary(r) == Nx.to_binary(Nx.reshape(host, {2, 1, 6}))
        assert Nx.to_binary(c, limit: 5) == binary_part(Nx.to_binary(host), 0, 5 * elem_size)
        assert Nx.backend_copy(c, Nx.BinaryBackend) == host
        # read back on the host
        assert Nx.Vulkan.stats(dev).ops_enqueued == before
      end

      # read by kernels: binary ops and comparisons take the value as an
      # immediate (one op), others read it in place or copy it
      for type <- [:f32, :s32, :f64] do
        x = random({3, 4}, type)
        hc = Nx.broadcast(Nx.tensor(3, type: type, backend: Nx.BinaryBackend), {3, 4})

        c =
          native(fn ->
            VB.constant(%Nx.Tensor{shape: {3, 4}, type: x.type, names: [nil, nil]}, 3, [])
          end)

        vx = vk(x)

        for {f, label} <- [
              {&Nx.subtract/2, "subtract"},
              {&Nx.multiply/2, "multiply"},
              {&Nx.greater/2, "greater"},
              {&Nx.equal/2, "equal"}
            ],
            {l, r, hl, hr} <- [{vx, c, x, hc}, {c, vx, hc, x}] do
          before = Nx.Vulkan.stats(dev).ops_enqueued
          got = native(fn -> f.(l, r) end)
          assert Nx.Vulkan.stats(dev).ops_enqueued == before + 1, label
          assert_same(got, f.(hl, hr))
        end

        y = random({4, 2}, type)
        p = Nx.greater(x, 0)
        assert_same(native(fn -> Nx.sum(c, axes: [1]) end), Nx.sum(hc, axes: [1]))
        assert_same(native(fn -> Nx.dot(c, vk(y)) end), Nx.dot(hc, y))
        assert_same(native(fn -> Nx.as_type(c, :f64) end), Nx.as_type(hc, :f64))
        assert_same(native(fn -> Nx.select(vk(p), c, vx) end), Nx.select(p, hc, x))
        # a constant predicate (compared with zero at its full shape)
        z = random({4}, type)
        assert_same(native(fn -> Nx.select(c, vx, vk(z)) end), Nx.select(hc, x, z))
        assert_same(native(fn -> Nx.add(c, 1) end), Nx.add(hc, 1))
        assert_same(native(fn -> Nx.slice(c, [1, 1], [2, 2]) end), Nx.slice(hc, [1, 1], [2, 2]))

        assert_same(
          native(fn -> Nx.concatenate([c, vx], axis: 0) end),
          Nx.concatenate([hc, x], axis: 0)
        )

        # deallocating one constant leaves the cached element to the others
        assert Nx.backend_deallocate(c) == :ok
        assert_raise ArgumentError, fn -> Nx.to_binary(c) end
        assert_raise ArgumentError, fn -> Nx.add(vx, c) end
        again = VB.constant(%Nx.Tensor{shape: {3, 4}, type: x.type, names: [nil, nil]}, 3, [])
        assert Nx.to_binary(again) == Nx.to_binary(hc)
        assert_same(native(fn -> Nx.subtract(vx, again) end), Nx.subtract(x, hc))
      end
    end

    test "backend_transfer frees its source; backend_copy does not" do
      a = random({3, 2}, :f32)
      t = vk(a)
      copy = Nx.backend_copy(t, VB)
      assert copy.data.ref != t.data.ref
      assert_same(copy, a)

      assert Nx.backend_transfer(t, {VB, device: t.data.device}) == t

      back = Nx.backend_transfer(t, Nx.BinaryBackend)
      assert %Nx.BinaryBackend{} = back.data
      assert back == a
      assert Nx.backend_deallocate(t) == :already_deallocated
      assert_raise ArgumentError, fn -> Nx.to_binary(t) end
      # The copy is independent.
      assert_same(copy, a)

      host_t = random({2}, :s32)
      on_device = Nx.backend_transfer(host_t, {VB, device: 0})
      assert %VB{device: 0} = on_device.data
      assert_same(on_device, host_t)
    end

    test "inspect is Nx.BinaryBackend's text when :add_backend_on_inspect is false" do
      previous = Application.get_env(:nx_vulkan, :add_backend_on_inspect)

      try do
        Application.put_env(:nx_vulkan, :add_backend_on_inspect, false)

        for t <- [
              random({}, :f32),
              random({3, 4}, :s32),
              random({200}, :f64),
              random({1, 3, 1}, :f32),
              Nx.iota({2, 3, 60}, type: :u8, backend: Nx.BinaryBackend)
            ],
            opts <- [[], [limit: 5], [limit: :infinity]] do
          assert inspect(vk(t), opts) == inspect(t, opts)
        end

        Application.put_env(:nx_vulkan, :add_backend_on_inspect, true)
        index = Nx.Vulkan.default_device_index()
        assert inspect(vk(Nx.tensor([1, 2]))) =~ "Nx.Vulkan.Backend<device #{index}>"
      after
        if previous == nil,
          do: Application.delete_env(:nx_vulkan, :add_backend_on_inspect),
          else: Application.put_env(:nx_vulkan, :add_backend_on_inspect, previous)
      end
    end

    test "backend options: device and validation" do
      t = Nx.tensor([1.0, 2.0], backend: {VB, device: 0})
      assert %VB{device: 0} = t.data
      assert Nx.to_flat_list(t) == [1.0, 2.0]

      Nx.with_default_backend({VB, device: 0}, fn ->
        assert %VB{device: 0} = Nx.iota({3}).data
      end)

      assert_raise ArgumentError, ~r/unknown keys/, fn ->
        Nx.tensor([1], backend: {VB, foo: 1})
      end

      assert_raise ArgumentError, ~r/device/, fn -> Nx.tensor([1], backend: {VB, device: -1}) end

      assert_raise ArgumentError, ~r/device/, fn ->
        Nx.tensor([1], backend: {VB, device: :gpu})
      end

      assert_raise ArgumentError, ~r/does not exist/, fn ->
        Nx.tensor([1], backend: {VB, device: 10_000})
      end
    end

    test "pointers are not supported" do
      assert_raise ArgumentError, ~r/pointers/, fn -> VB.to_pointer(vk(Nx.tensor([1])), []) end

      assert_raise ArgumentError, ~r/pointers/, fn ->
        VB.from_pointer(0, {:f, 32}, {1}, [], [])
      end
    end

    test "types that cannot be stored raise naming type, op and device" do
      out = %Nx.Tensor{type: {:f, 8}, shape: {1}, names: [nil]}

      assert_raise ArgumentError, ~r/f8.*from_binary.*device 0/, fn ->
        VB.from_binary(out, <<0>>, device: 0)
      end
    end

    ## Host fallback

    test "ops without kernels fall back to the host, counted, with results on the device" do
      a = random({3, 4}, :f32)

      # A tuple of results (eigh of a complex matrix).
      before = fallback_count(:eigh)
      {vals, vecs} = Nx.LinAlg.eigh(vk(hermitian()))
      assert fallback_count(:eigh) == before + 1
      {vals0, vecs0} = Nx.LinAlg.eigh(hermitian())
      assert_same(vals, vals0)
      assert_same(vecs, vecs0)

      # Types without kernels for an op (complex windows).
      i = Nx.complex(Nx.iota({5}, backend: Nx.BinaryBackend), 2.0)
      before = fallback_count(:window_sum)
      assert_same(Nx.window_sum(vk(i), {2}), Nx.window_sum(i, {2}))
      assert fallback_count(:window_sum) == before + 1

      # Tuples of results, lists of tensors, functions.
      assert_same(Nx.concatenate([vk(a), a, vk(a)], axis: 1), Nx.concatenate([a, a, a], axis: 1))
      assert_same(Nx.argmax(vk(a), axis: 1), Nx.argmax(a, axis: 1))

      fun = fn x, acc -> Nx.max(x, acc) end
      assert_same(Nx.reduce(vk(a), 0.0, [axes: [1]], fun), Nx.reduce(a, 0.0, [axes: [1]], fun))
      assert_same(Nx.map(vk(a), &Nx.multiply(&1, 3)), Nx.map(a, &Nx.multiply(&1, 3)))

      assert_same(
        Nx.window_reduce(vk(a), 0.0, {2, 2}, fun),
        Nx.window_reduce(a, 0.0, {2, 2}, fun)
      )

      # Functions that capture device tensors still work.
      offset = Nx.tensor(0.5, backend: VB)
      add_offset = fn x, acc -> x |> Nx.add(acc) |> Nx.add(offset) end
      expected = Nx.reduce(a, 0.0, [axes: [0]], fn x, acc -> x |> Nx.add(acc) |> Nx.add(0.5) end)
      assert_same(Nx.reduce(vk(a), 0.0, [axes: [0]], add_offset), expected, 1.0e-5)
      assert_same(Nx.window_sum(vk(a), {2, 2}), Nx.window_sum(a, {2, 2}))
      assert_same(Nx.cumulative_sum(vk(a), axis: 1), Nx.cumulative_sum(a, axis: 1))

      {values, indices} = Nx.top_k(vk(a), k: 2)
      {ev, ei} = Nx.top_k(a, k: 2)
      assert_same(values, ev)
      assert_same(indices, ei)

      m =
        Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], backend: Nx.BinaryBackend)

      {q, r} = Nx.LinAlg.qr(vk(m))
      {eq, er} = Nx.LinAlg.qr(m)
      assert_same(q, eq, 1.0e-4)
      assert_same(r, er, 1.0e-4)
      assert_same(Nx.LinAlg.cholesky(vk(m)), Nx.LinAlg.cholesky(m), 1.0e-4)
      assert_same(Nx.LinAlg.determinant(vk(m)), Nx.LinAlg.determinant(m), 1.0e-4)

      assert_same(
        Nx.LinAlg.solve(vk(m), vk(Nx.tensor([1.0, 2.0, 3.0]))),
        Nx.LinAlg.solve(m, Nx.tensor([1.0, 2.0, 3.0])),
        1.0e-4
      )

      {p, l, u} = Nx.LinAlg.lu(vk(m))
      {ep, el, eu} = Nx.LinAlg.lu(m)
      assert_same(p, ep)
      assert_same(l, el, 1.0e-5)
      assert_same(u, eu, 1.0e-5)
    end

    test "the :raise policy raises naming the op; native ops do not raise" do
      a = vk(random({3, 4}, :f32))

      Nx.Vulkan.with_host_fallback(:raise, fn ->
        assert_raise ArgumentError, ~r/map/, fn -> Nx.map(a, &Nx.add(&1, 1)) end
        assert_raise ArgumentError, ~r/eigh/, fn -> Nx.LinAlg.eigh(vk(hermitian())) end
        assert %VB{} = elem(Nx.LinAlg.qr(a), 0).data
        assert %VB{} = elem(Nx.LinAlg.svd(a), 0).data
        assert %VB{} = Nx.add(a, a).data
        assert %VB{} = Nx.dot(a, Nx.transpose(a)).data
        assert %VB{} = Nx.sum(a, axes: [0]).data
        assert %VB{} = Nx.equal(a, a).data
        assert %VB{} = Nx.select(Nx.greater(a, 0), a, 0.0).data
      end)
    end

    test "concatenate, pad and put_slice assemble on the device" do
      for type <- [:f32, :s32, :f64, :u8] do
        a = small_values({2, 3, 4}, type)
        b = small_values({2, 1, 4}, type)
        c = small_values({2, 5, 4}, type)

        for axis <- [0, 1, 2] do
          parts =
            case axis do
              1 -> [a, b, c]
              _ -> [a, a, a]
            end

          assert_same(
            native(fn -> Nx.concatenate(Enum.map(parts, &vk/1), axis: axis) end),
            Nx.concatenate(parts, axis: axis)
          )
        end

        # mixed types convert to the output type
        mixed = [a, small_values({2, 3, 4}, :s32)]

        assert_same(
          native(fn -> Nx.concatenate(Enum.map(mixed, &vk/1), axis: 2) end),
          Nx.concatenate(mixed, axis: 2)
        )

        for config <- [
              [{1, 2, 0}, {0, 0, 0}, {2, 1, 0}],
              [{0, 0, 1}, {1, 1, 2}, {0, 0, 0}],
              [{-1, 2, 1}, {2, -2, 0}, {1, -1, 1}],
              [{-1, 0, 2}, {0, 0, 0}, {-2, 3, 0}]
            ] do
          pv = Nx.tensor(9, type: type, backend: Nx.BinaryBackend)
          assert_same(native(fn -> Nx.pad(vk(a), pv, config) end), Nx.pad(a, pv, config))
        end

        slice = small_values({1, 2, 2}, type)

        for start <- [[0, 0, 0], [1, 1, 2], [1, 2, 3], [-1, 5, 9]] do
          assert_same(
            native(fn -> Nx.put_slice(vk(a), start, vk(slice)) end),
            Nx.put_slice(a, start, slice)
          )
        end
      end

      # start indices given as tensors
      a = small_values({4, 4}, :f32)
      s = small_values({2, 2}, :f32)
      start = [Nx.tensor(1), Nx.tensor(3)]
      assert_same(native(fn -> Nx.put_slice(vk(a), start, vk(s)) end), Nx.put_slice(a, start, s))
    end

    test "all and any reduce on the device" do
      for type <- [:f32, :s32, :f64, :u8, :u32, :u64, :s8],
          shape <- [{}, {5}, {3, 4}, {2, 3, 4}] do
        a = random(shape, :s32, {0, 2}) |> Nx.as_type(type)

        for opts <- [[], [axes: [0]], [axes: [-1], keep_axes: true]],
            Nx.rank(a) > 0 or opts == [] do
          assert_same(native(fn -> Nx.all(vk(a), opts) end), Nx.all(a, opts))
          assert_same(native(fn -> Nx.any(vk(a), opts) end), Nx.any(a, opts))
        end
      end

      # negative elements are non-zero too
      s = Nx.tensor([[-1, 0], [-3, -2]], type: :s8, backend: Nx.BinaryBackend)
      assert_same(native(fn -> Nx.all(vk(s), axes: [1]) end), Nx.all(s, axes: [1]))
      assert_same(native(fn -> Nx.any(vk(s), axes: [0]) end), Nx.any(s, axes: [0]))

      # a comparison's u8 result reduces without a mask: two device ops
      m = vk(random({4, 6}, :s32)) |> Nx.greater(0)
      before = Nx.Vulkan.stats().ops_enqueued
      _ = native(fn -> Nx.all(m, axes: [1]) end)
      assert Nx.Vulkan.stats().ops_enqueued == before + 2

      nan = Nx.tensor([:nan, 1.0], backend: Nx.BinaryBackend)
      assert Nx.to_number(Nx.all(vk(nan))) == 1
    end

    test "is_nan and is_infinity on the device" do
      for type <- [:f32, :f64] do
        t =
          Nx.tensor([1.0, :nan, :infinity, :neg_infinity, -0.0, 3.0e38],
            type: type,
            backend: Nx.BinaryBackend
          )

        assert_same(native(fn -> Nx.is_nan(vk(t)) end), Nx.is_nan(t))
        assert_same(native(fn -> Nx.is_infinity(vk(t)) end), Nx.is_infinity(t))
      end
    end

    test "special functions on the device match Nx.BinaryBackend" do
      for type <- [:f32, :f64] do
        x = random({4, 5}, type, {-2.0, 2.0})
        p = random({4, 5}, type, {0.01, 5.0})
        u = random({4, 5}, type, {-0.99, 0.99})

        for {op, input} <- [
              expm1: x,
              log1p: p,
              erf: x,
              erfc: x,
              erf_inv: u,
              tan: x,
              sinh: x,
              cosh: x
            ] do
          assert_same(
            native(fn -> apply(Nx, op, [vk(input)]) end),
            apply(Nx, op, [input]),
            1.0e-6
          )
        end
      end
    end

    test "u32 bit arithmetic, bitcast and Nx.Random run on the device" do
      a = Nx.tensor([0, 1, 0xFFFFFFFF, 123_456_789], type: :u32, backend: Nx.BinaryBackend)
      b = Nx.tensor([3, 31, 32, 7], type: :u32, backend: Nx.BinaryBackend)

      for op <- [
            :add,
            :subtract,
            :multiply,
            :bitwise_xor,
            :bitwise_or,
            :left_shift,
            :right_shift,
            :quotient,
            :remainder
          ] do
        assert_same(native(fn -> apply(Nx, op, [vk(a), vk(b)]) end), apply(Nx, op, [a, b]))
      end

      f = Nx.tensor([1.0, -2.5, 3.0e38], backend: Nx.BinaryBackend)
      assert_same(native(fn -> Nx.bitcast(vk(f), :u32) end), Nx.bitcast(f, :u32))
      assert_same(native(fn -> vk(f) |> Nx.bitcast(:s32) |> Nx.bitcast(:f32) end), f)

      key = Nx.Random.key(1701)

      {u, _} = Nx.Random.uniform(key, shape: {3, 4})
      {n, _} = Nx.Random.normal(key, shape: {5})
      Nx.Vulkan.reset_fallbacks()
      {du, _} = native(fn -> Nx.Random.uniform(vk(key), shape: {3, 4}) end)
      assert_same(du, u)
      {dn, _} = native(fn -> Nx.Random.normal(vk(key), shape: {5}) end)
      assert_same(dn, n, 1.0e-6)
      assert Nx.Vulkan.fallbacks() == %{}
    end

    # Small integral values (many ties) of type.
    defp small_values(shape, :u8), do: random(shape, :s32, {0, 3}) |> Nx.as_type(:u8)
    defp small_values(shape, type), do: random(shape, :s32, {-3, 3}) |> Nx.as_type(type)

    test "comparisons, logical ops and select on the device match Nx.BinaryBackend" do
      for {ta, tb} <- [{:f32, :f32}, {:s32, :s32}, {:f64, :f64}, {:s32, :f32}, {:u8, :u8}],
          {ls, rs} <- @shape_pairs do
        a = small_values(ls, ta)
        b = small_values(rs, tb)

        for op <-
              [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal] ++
                [:logical_and, :logical_or, :logical_xor] do
          got = native(fn -> apply(Nx, op, [vk(a), vk(b)]) end)
          assert got.type == {:u, 8}
          assert_same(got, apply(Nx, op, [a, b]))
        end

        assert_same(native(fn -> Nx.logical_not(vk(a)) end), Nx.logical_not(a))
      end

      # NaN compares false except not_equal, and is true as a logical value.
      nan = Nx.tensor([:nan, 1.0, 0.0], backend: Nx.BinaryBackend)
      one = Nx.tensor([1.0, 1.0, 1.0], backend: Nx.BinaryBackend)
      assert Nx.to_flat_list(Nx.equal(vk(nan), vk(one))) == [0, 1, 0]
      assert Nx.to_flat_list(Nx.not_equal(vk(nan), vk(one))) == [1, 0, 1]
      assert Nx.to_flat_list(Nx.logical_and(vk(nan), vk(one))) == [1, 1, 0]

      # select: u8 and non-u8 predicates, broadcast branches, mixed types.
      for type <- [:f32, :s32, :f64, :u8], {ls, rs} <- @shape_pairs do
        p = random(ls, :s32, {-1, 2})
        # on_true broadcasts from a size-1 slice of pred's shape
        x = random(ls, :s32, {0, 9}) |> Nx.as_type(type)
        x = if Nx.rank(x) > 0, do: Nx.slice_along_axis(x, 0, 1, axis: 0), else: x
        y = random(ls, :s32, {10, 19}) |> Nx.as_type(type)
        _ = rs

        assert_same(
          native(fn -> Nx.select(Nx.greater(vk(p), 0), vk(x), vk(y)) end),
          Nx.select(Nx.greater(p, 0), x, y)
        )

        seven = Nx.tensor(7, type: type, backend: Nx.BinaryBackend)
        assert_same(native(fn -> Nx.select(vk(p), vk(x), seven) end), Nx.select(p, x, seven))
      end
    end

    test "stack runs on the device and block on the host when Nx has them" do
      a = random({2, 3}, :f32)

      # stack/3 is a callback of newer Nx; called directly it works too.
      out = %{Nx.stack([a, a], axis: 1) | data: nil}
      assert_same(native(fn -> VB.stack(out, [vk(a), vk(a)], 1) end), Nx.stack([a, a], axis: 1))

      before = fallback_count(:add_one)
      out = %{a | data: nil}
      got = VB.block(%AddOne{}, out, [vk(a)], fn %AddOne{}, t -> Nx.add(t, 1) end)
      assert fallback_count(:add_one) == before + 1
      assert_same(got, Nx.add(a, 1))
    end

    ## Asynchrony and concurrency

    test "ops are queued: enqueueing returns before the device is done; only the download waits" do
      # A dependent chain of 1000 matrix products by a cyclic permutation:
      # exact, and far more device work than host work (larger matrices on
      # GPUs than on CPU devices such as lavapipe).
      index = Nx.Vulkan.default_device_index()
      n = if Nx.Vulkan.NIF.device_info(index).type == :cpu, do: 128, else: 1024
      x = Nx.iota({n, n}, type: :s32, backend: VB)

      perm =
        Nx.iota({n, n}, axis: 1)
        |> Nx.equal(Nx.iota({n, n}, axis: 0) |> Nx.add(1) |> Nx.remainder(n))

      p = perm |> Nx.as_type(:s32) |> vk()
      Nx.Vulkan.synchronize(index)
      base = Nx.Vulkan.stats(index)

      {enqueue_us, result} =
        :timer.tc(fn ->
          native(fn -> Enum.reduce(1..1000, x, fn _, acc -> Nx.dot(acc, p) end) end)
        end)

      queued = Nx.Vulkan.stats(index)
      assert queued.ops_enqueued - base.ops_enqueued >= 1000
      assert queued.ops_completed < queued.ops_enqueued

      {download_us, binary} = :timer.tc(fn -> Nx.to_binary(result) end)
      done = Nx.Vulkan.stats(index)
      assert done.ops_completed >= queued.ops_enqueued
      assert download_us > enqueue_us

      # x . P shifts columns right by one: 1000 products shift by 1000 mod n.
      shift = rem(1000, n)

      expected =
        for i <- 0..(n - 1),
            j <- 0..(n - 1),
            into: <<>>,
            do: <<i * n + rem(j - shift + n, n)::signed-32-native>>

      assert binary == expected
    end

    test "64 processes run their own chains on one device, exactly" do
      results =
        1..64
        |> Task.async_stream(
          fn i ->
            native(fn ->
              x = Nx.iota({1000}, type: :s32, backend: VB)
              y = Nx.tensor(Enum.to_list(1..1000), type: :f32, backend: VB)

              {x, y} =
                Enum.reduce(1..50, {x, y}, fn _, {x, y} ->
                  {x |> Nx.multiply(3) |> Nx.add(i) |> Nx.remainder(1_000_003),
                   y |> Nx.add(i) |> Nx.subtract(0.5) |> Nx.multiply(2.0) |> Nx.divide(2.0)}
                end)

              {i, Nx.to_flat_list(x), Nx.to_flat_list(y)}
            end)
          end,
          max_concurrency: 64,
          timeout: 120_000
        )
        |> Enum.map(fn {:ok, r} -> r end)

      for {i, xs, ys} <- results do
        expected_x =
          Enum.map(0..999, fn v ->
            Enum.reduce(1..50, v, fn _, acc -> rem(acc * 3 + i, 1_000_003) end)
          end)

        assert xs == expected_x
        assert ys == Enum.map(1..1000, fn v -> v + 50 * (i - 0.5) end)
      end
    end
  end
else
  defmodule Nx.Vulkan.BackendTest do
    use ExUnit.Case
    @moduletag :nx

    test "backend tests need Nx"
  end
end
