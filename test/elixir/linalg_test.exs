# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.LinAlgTest do
    # Nx.LinAlg.cholesky/1, triangular_solve/3, lu/2, solve/2,
    # determinant/1, qr/2, eigh/2 and svd/2 on the device against
    # Nx.BinaryBackend on the same inputs (computing in f64; svd: Nx's
    # default implementation in the input's type; lu: the factorization's
    # properties, as the device pivots as LAPACK does): every option,
    # batches, vectorized axes, types that convert, bad inputs.
    use ExUnit.Case, async: false
    @moduletag :nx

    alias Nx.Vulkan.Backend, as: VB

    setup do
      :rand.seed(:exsss, {7, 11, 13})
      :ok
    end

    defp vk(t), do: Nx.backend_copy(t, VB)
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)
    defp native(fun), do: Nx.Vulkan.with_host_fallback(:raise, fun)

    defp uniform(shape, lo, hi) do
      for(_ <- 1..Tuple.product(shape)//1, do: lo + :rand.uniform() * (hi - lo))
      |> Nx.tensor(type: :f64, backend: Nx.BinaryBackend)
      |> Nx.reshape(shape)
    end

    # Symmetric positive definite matrices of order n (G G^T / n + I) in a
    # batch of shape batch, f64 on the host.
    defp spd(batch, n) do
      g = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
      axes = Enum.to_list(0..(tuple_size(batch) - 1)//1)
      gt = Nx.transpose(g, axes: axes ++ [tuple_size(batch) + 1, tuple_size(batch)])

      g
      |> Nx.dot([tuple_size(batch) + 1], axes, gt, [tuple_size(batch)], axes)
      |> Nx.divide(n)
      |> Nx.add(Nx.eye(n, type: :f64, backend: Nx.BinaryBackend))
    end

    # got (on the device) equals expected (f64 on the host) to rel relative
    # and abs absolute error, in shape and type type.
    defp assert_close(got, expected, type, rel, abs \\ 1.0e-30) do
      assert %VB{} = got.data
      assert got.shape == expected.shape
      assert got.type == type

      Enum.zip(Nx.to_flat_list(host(got)), Nx.to_flat_list(expected))
      |> Enum.with_index()
      |> Enum.each(fn {{g, e}, i} ->
        unless is_float(g) and abs(g - e) <= rel * abs(e) + abs do
          flunk("element #{i}: got #{inspect(g)}, expected #{inspect(e)}")
        end
      end)
    end

    # One f32 ulp and a little: the device computes f32 solves in double
    # where it has f64 (lavapipe does) and rounds once.
    @f32_rel 1.2e-7
    # f32 Cholesky factors are computed in f32, as Nx computes them.
    @f32_chol 2.0e-5

    describe "cholesky" do
      test "f32 and f64 of many orders and batches stay on the device" do
        for {batch, n} <- [
              {{}, 1},
              {{}, 2},
              {{3}, 5},
              {{2, 2}, 16},
              {{}, 17},
              {{2}, 40},
              {{}, 70}
            ] do
          a = spd(batch, n)
          expected = Nx.LinAlg.cholesky(a)

          got = native(fn -> Nx.LinAlg.cholesky(vk(a)) end)
          assert_close(got, expected, {:f, 64}, 1.0e-13, 1.0e-13)

          got = native(fn -> Nx.LinAlg.cholesky(vk(Nx.as_type(a, :f32))) end)
          expected32 = Nx.LinAlg.cholesky(Nx.as_type(Nx.as_type(a, :f32), :f64))
          assert_close(got, expected32, {:f, 32}, @f32_chol, @f32_chol)
        end
      end

      test "zeros above the diagonal, whatever the input holds there" do
        a = spd({}, 6)
        upper = Nx.greater(Nx.iota({6, 1}), Nx.iota({1, 6})) |> Nx.logical_not()

        strict_upper =
          Nx.logical_and(upper, Nx.logical_not(Nx.equal(Nx.iota({6, 1}), Nx.iota({1, 6}))))

        garbage = Nx.select(strict_upper, 1.0e30, a)
        got = native(fn -> Nx.LinAlg.cholesky(vk(garbage)) end)
        assert_close(got, Nx.LinAlg.cholesky(a), {:f, 64}, 1.0e-13, 1.0e-13)
        assert Nx.to_flat_list(Nx.select(strict_upper, host(got), 0.0)) == List.duplicate(0.0, 36)
      end

      test "integer, f16 and bf16 inputs take Nx's output type; views and vectorized axes" do
        a = Nx.tensor([[4, 2, 2], [2, 5, 3], [2, 3, 6]], backend: Nx.BinaryBackend)
        expected = Nx.LinAlg.cholesky(Nx.as_type(a, :f64))
        got = native(fn -> Nx.LinAlg.cholesky(vk(a)) end)
        assert_close(got, expected, {:f, 32}, @f32_chol, @f32_chol)

        for type <- [:f16, :bf16] do
          got = native(fn -> Nx.LinAlg.cholesky(vk(Nx.as_type(a, type))) end)
          assert_close(got, expected, Nx.Type.normalize!(type), 1.0e-2)
        end

        # A transposed view (symmetric input: the same factor).
        got = native(fn -> Nx.LinAlg.cholesky(Nx.transpose(vk(Nx.as_type(a, :f64)))) end)
        assert_close(got, expected, {:f, 64}, 1.0e-15)

        b = spd({3}, 4)
        got = native(fn -> b |> vk() |> Nx.vectorize(:x) |> Nx.LinAlg.cholesky() end)
        assert got.vectorized_axes == [x: 3]
        assert_close(Nx.devectorize(got), Nx.LinAlg.cholesky(b), {:f, 64}, 1.0e-13, 1.0e-13)
      end

      test "not positive definite: NaN from the failing row on, as Nx" do
        a =
          Nx.tensor([[4.0, 2.0, 0.0], [2.0, -3.0, 0.0], [0.0, 0.0, 9.0]],
            backend: Nx.BinaryBackend
          )

        got = native(fn -> a |> vk() |> Nx.LinAlg.cholesky() |> host() end)
        [[l00, 0.0, 0.0], [l10, l11, 0.0], _] = Nx.to_list(got)
        assert {l00, l10} == {2.0, 1.0}
        assert l11 == :nan
      end

      test "complex inputs run on the host, counted" do
        a =
          Nx.tensor(
            [
              [Complex.new(4.0, 0.0), Complex.new(1.0, 1.0)],
              [Complex.new(1.0, -1.0), Complex.new(3.0, 0.0)]
            ],
            backend: Nx.BinaryBackend
          )

        before = Map.get(Nx.Vulkan.fallbacks(), :cholesky, 0)
        got = Nx.LinAlg.cholesky(vk(a))
        assert Map.get(Nx.Vulkan.fallbacks(), :cholesky, 0) == before + 1
        assert %VB{} = got.data
        assert Nx.to_flat_list(host(got)) == Nx.to_flat_list(Nx.LinAlg.cholesky(a))
      end

      test "inside defn, the Evaluator calls the backend; gradients run too" do
        a = spd({}, 5)
        fun = Nx.Defn.jit(&Nx.LinAlg.cholesky/1, compiler: Nx.Defn.Evaluator)
        got = native(fn -> fun.(vk(a)) end)
        assert_close(got, Nx.LinAlg.cholesky(a), {:f, 64}, 1.0e-13, 1.0e-13)

        grad = fn x -> Nx.Defn.grad(x, &(&1 |> Nx.LinAlg.cholesky() |> Nx.sum())) end
        assert_close(grad.(vk(a)), grad.(a), {:f, 64}, 1.0e-9, 1.0e-9)
      end
    end

    describe "triangular_solve" do
      test "every option, vector and matrix right-hand sides, batches, on the device" do
        for {batch, n, cols} <- [
              {{}, 1, nil},
              {{}, 5, nil},
              {{}, 17, 3},
              {{2}, 9, nil},
              {{3}, 33, 20},
              # In panels of 32 rows.
              {{}, 150, nil},
              {{2}, 70, 16}
            ],
            lower <- [true, false],
            left <- [true, false],
            transform <- [:none, :transpose] do
          tri = if lower, do: &Nx.tril/1, else: &Nx.triu/1
          eye = Nx.eye(n, type: :f64, backend: Nx.BinaryBackend)
          off = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0) |> Nx.divide(n)
          # A diagonal of magnitude 1 to 2, random signs: well conditioned.
          sign = Nx.select(Nx.greater(uniform(Tuple.append(batch, n), -1.0, 1.0), 0), 1.0, -1.0)
          diag = uniform(Tuple.append(batch, n), 1.0, 2.0) |> Nx.multiply(sign)

          a =
            off
            |> Nx.multiply(Nx.subtract(1, eye))
            |> Nx.add(Nx.multiply(eye, Nx.new_axis(diag, -1)))
            |> then(tri)

          b_shape =
            if cols == nil,
              do: Tuple.append(batch, n),
              else:
                Tuple.append(
                  Tuple.append(batch, if(left, do: n, else: cols)),
                  if(left, do: cols, else: n)
                )

          b = uniform(b_shape, -4.0, 4.0)
          opts = [lower: lower, left_side: left, transform_a: transform]
          expected = Nx.LinAlg.triangular_solve(a, b, opts)

          got = native(fn -> Nx.LinAlg.triangular_solve(vk(a), vk(b), opts) end)
          assert_close(got, expected, {:f, 64}, 1.0e-12, 1.0e-12)

          a32 = Nx.as_type(a, :f32)
          b32 = Nx.as_type(b, :f32)

          expected32 =
            Nx.LinAlg.triangular_solve(Nx.as_type(a32, :f64), Nx.as_type(b32, :f64), opts)

          got = native(fn -> Nx.LinAlg.triangular_solve(vk(a32), vk(b32), opts) end)
          assert_close(got, expected32, {:f, 32}, 2 * @f32_rel, 1.0e-7)
        end
      end

      test "Nx's examples to the last digit (f32 computed in double, rounded once)" do
        a = Nx.tensor([[3, 0, 0, 0], [2, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
        b = Nx.tensor([4, 2, 4, 2])
        got = native(fn -> Nx.LinAlg.triangular_solve(vk(a), vk(b)) end)
        assert Nx.to_flat_list(host(got)) == Nx.to_flat_list(Nx.LinAlg.triangular_solve(a, b))

        a = Nx.tensor([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 2], [0, 0, 0, 3]])
        b = Nx.tensor([2, 4, 2, 4])
        got = native(fn -> Nx.LinAlg.triangular_solve(vk(a), vk(b), lower: false) end)

        assert Nx.to_flat_list(host(got)) ==
                 Nx.to_flat_list(Nx.LinAlg.triangular_solve(a, b, lower: false))
      end

      test "mixed and integer types convert to Nx's output type" do
        a = Nx.tensor([[2, 0], [1, 4]], type: :s32)
        b = Nx.tensor([[2.0, 4.0], [9.0, 1.0]], type: :f64)
        got = native(fn -> Nx.LinAlg.triangular_solve(vk(a), vk(b)) end)
        assert_close(got, Nx.LinAlg.triangular_solve(a, b), {:f, 64}, 1.0e-15)

        got =
          native(fn ->
            Nx.LinAlg.triangular_solve(vk(Nx.as_type(a, :f16)), vk(Nx.as_type(b, :f16)))
          end)

        assert_close(got, Nx.LinAlg.triangular_solve(a, b), {:f, 16}, 1.0e-3)
      end

      test "chained solves, forced on any device: Nx's solution or the wait's error" do
        # Order 300, 1 and 3 right-hand sides: one dispatch of blocks of 32
        # rows that wait on one another's values (`chained_solve`, on GPUs
        # by default). On llvmpipe, which runs a few workgroups at a time, a
        # wait can outlast its loop limit: the flags then raise rather than
        # return the unfinished solve. Never a wrong result.
        n = 300
        eye = Nx.eye(n, type: :f64, backend: Nx.BinaryBackend)

        a =
          uniform({n, n}, -1.0, 1.0)
          |> Nx.divide(n)
          |> Nx.multiply(Nx.subtract(1, eye))
          |> Nx.add(Nx.multiply(eye, 1.5))
          |> Nx.tril()

        Nx.Vulkan.reopen(nil, %{chained_solve: :always})

        try do
          for b <- [uniform({n}, -4.0, 4.0), uniform({n, 3}, -4.0, 4.0)], _ <- 1..2 do
            expected = Nx.LinAlg.triangular_solve(a, b)

            try do
              got = native(fn -> Nx.LinAlg.triangular_solve(vk(a), vk(b)) end)
              assert_close(got, expected, {:f, 64}, 1.0e-12, 1.0e-12)
            rescue
              e in RuntimeError ->
                assert e.message =~ "did not run the solve's workgroups together"
            end
          end
        after
          Nx.Vulkan.reopen(nil, %{})
        end

        assert_raise ArgumentError, fn -> Nx.Vulkan.reopen(nil, %{chained_solve: :sometimes}) end
      end

      test "with :singular_check false a singular system returns infinities, no error" do
        a = vk(Nx.tensor([[1.0, 0.0], [2.0, 0.0]]))
        b = vk(Nx.tensor([1.0, 1.0]))
        previous = Application.get_env(:nx_vulkan, :singular_check)
        Application.put_env(:nx_vulkan, :singular_check, false)

        try do
          got = native(fn -> Nx.LinAlg.triangular_solve(a, b) end)
          [x0, x1] = Nx.to_flat_list(host(got))
          assert x0 == 1.0
          assert x1 in [:infinity, :neg_infinity, :nan]
        after
          if previous == nil,
            do: Application.delete_env(:nx_vulkan, :singular_check),
            else: Application.put_env(:nx_vulkan, :singular_check, previous)
        end

        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          Nx.LinAlg.triangular_solve(a, b)
        end
      end

      test "a zero on the diagonal raises Nx's error; the inputs survive" do
        a = vk(Nx.tensor([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]))
        b = vk(Nx.tensor([4, 2, 4, 2]))

        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          native(fn -> Nx.LinAlg.triangular_solve(a, b) end)
        end

        # Only one system of a batch singular.
        a2 = vk(Nx.tensor([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 0.0], [2.0, 0.0]]]))
        b2 = vk(Nx.tensor([[1.0, 8.0], [1.0, 1.0]]))

        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          Nx.LinAlg.triangular_solve(a2, b2)
        end

        assert Nx.to_flat_list(host(a)) |> length() == 16
        assert Nx.to_flat_list(host(b)) == [4, 2, 4, 2]
      end
    end

    # {p, l, u} of a (on the host, f64): P a permutation matrix, L unit
    # lower triangular with entries of at most 1 (partial pivoting), U upper
    # triangular, and P L U equal to a within tol.
    defp assert_plu({p, l, u}, a, tol) do
      {p, l, u} = {host(p), host(l), host(u)}
      n = elem(a.shape, tuple_size(a.shape) - 1)
      rows = fn t -> t |> Nx.reshape({:auto, n, n}) |> Nx.to_list() end
      lower = Nx.tril(Nx.broadcast(1, {n, n}), k: -1) |> Nx.to_list() |> List.flatten()

      for {pm, lm, um} <- Enum.zip([rows.(p), rows.(l), rows.(u)]) do
        assert Enum.all?(List.flatten(pm), &(&1 in [0, 1, 0.0, 1.0]))
        assert Enum.all?(pm, &(Enum.sum(&1) == 1))
        assert Enum.all?(Enum.zip_with(pm, & &1), &(Enum.sum(&1) == 1))

        for {{lv, uv}, below} <- Enum.zip(Enum.zip(List.flatten(lm), List.flatten(um)), lower),
            do: if(below == 1, do: assert(abs(lv) <= 1 and uv == 0))

        assert Enum.map(0..(n - 1), &(lm |> Enum.at(&1) |> Enum.at(&1))) == List.duplicate(1.0, n)

        assert lm
               |> Enum.with_index()
               |> Enum.all?(fn {r, i} -> Enum.drop(r, i + 1) |> Enum.all?(&(&1 == 0)) end)
      end

      f64 = &Nx.as_type(&1, :f64)
      plu = Nx.dot(f64.(p), [-1], [0], Nx.dot(f64.(l), [-1], [0], f64.(u), [-2], [0]), [-2], [0])
      plu = Nx.reshape(plu, a.shape)

      diff =
        Nx.subtract(plu, Nx.as_type(a, :f64)) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()

      assert diff <= tol, "max |P L U - A| = #{diff}"
    end

    # max |A x - b| (f64 on the host, x of any float type) is at most tol:
    # x solves the systems, vector or matrix right-hand sides, batched.
    defp assert_residual(a, x, b, tol) do
      rank = tuple_size(a.shape)
      batch = Enum.to_list(0..(rank - 3)//1)
      x = Nx.as_type(x, :f64)
      vector? = tuple_size(b.shape) == rank - 1
      x2 = if vector?, do: Nx.new_axis(x, -1), else: x
      ax = Nx.dot(a, [rank - 1], batch, x2, [rank - 2], batch)
      ax = if vector?, do: Nx.squeeze(ax, axes: [rank - 1]), else: ax
      diff = Nx.subtract(ax, b) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
      assert diff <= tol, "max |A x - b| = #{diff}"
    end

    defp batch3(t),
      do:
        Nx.reshape(
          t,
          {:auto, elem(t.shape, tuple_size(t.shape) - 2), elem(t.shape, tuple_size(t.shape) - 1)}
        )

    describe "lu, solve and determinant" do
      test "lu of many orders and batches stays on the device: A = P L U" do
        for {batch, n} <- [
              {{}, 1},
              {{}, 2},
              {{3}, 5},
              {{2, 2}, 16},
              {{}, 33},
              {{2}, 40},
              {{}, 70}
            ] do
          a = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
          {p, l, u} = native(fn -> Nx.LinAlg.lu(vk(a)) end)
          for t <- [p, l, u], do: assert(%VB{} = t.data) && assert(t.shape == a.shape)
          assert {p.type, l.type, u.type} == {{:f, 64}, {:f, 64}, {:f, 64}}
          assert_plu({batch3(p), batch3(l), batch3(u)}, batch3(a), 1.0e-13 * n)

          a32 = Nx.as_type(a, :f32)
          {p, l, u} = native(fn -> Nx.LinAlg.lu(vk(a32)) end)
          assert {p.type, l.type, u.type} == {{:f, 32}, {:f, 32}, {:f, 32}}
          assert_plu({batch3(p), batch3(l), batch3(u)}, batch3(a32), 2.0e-6 * n)
        end
      end

      test "lu's types: P in the input's type, L and U floating; a singular matrix" do
        a = Nx.tensor([[1, 2, 3], [2, 4, 6], [1, 0, 1]])
        {p, l, u} = native(fn -> Nx.LinAlg.lu(vk(a)) end)
        assert {p.type, l.type, u.type} == {{:s, 64}, {:f, 32}, {:f, 32}}
        # Column 0 pivots on row 1; column 1 then holds 0 and -2.
        assert Nx.to_list(host(p)) == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
        assert Nx.to_list(host(l)) == [[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.5, 0.0, 1.0]]
        assert Nx.to_list(host(u)) == [[2.0, 4.0, 6.0], [0.0, -2.0, -2.0], [0.0, 0.0, 0.0]]

        {p, l, u} = native(fn -> Nx.LinAlg.lu(vk(Nx.as_type(a, :f16))) end)
        assert {p.type, l.type, u.type} == {{:f, 16}, {:f, 16}, {:f, 16}}
        assert Nx.to_list(host(u)) == [[2.0, 4.0, 6.0], [0.0, -2.0, -2.0], [0.0, 0.0, 0.0]]

        # :eps flushes small entries, as Nx.BinaryBackend does.
        s = Nx.tensor([[1.0, 0.0], [1.0e-8, 1.0]], type: :f64)
        {_, l, _} = native(fn -> Nx.LinAlg.lu(vk(s), eps: 1.0e-6) end)
        assert Nx.to_list(host(l)) == [[1.0, 0.0], [0.0, 1.0]]
        {_, l, _} = native(fn -> Nx.LinAlg.lu(vk(s)) end)
        assert Nx.to_list(host(l)) == [[1.0, 0.0], [1.0e-8, 1.0]]
      end

      test "solve: vector and matrix right-hand sides, batches, on the device" do
        for {batch, n, cols} <- [
              {{}, 1, nil},
              {{}, 4, nil},
              {{3}, 6, 2},
              {{}, 40, 5},
              {{2}, 70, nil}
            ] do
          a = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
          a = Nx.add(a, Nx.multiply(Nx.eye(n, type: :f64, backend: Nx.BinaryBackend), 2.0))

          b_shape =
            if cols, do: Tuple.append(Tuple.append(batch, n), cols), else: Tuple.append(batch, n)

          b = uniform(b_shape, -2.0, 2.0)

          got = native(fn -> Nx.LinAlg.solve(vk(a), vk(b)) end)
          assert %VB{} = got.data
          assert {got.shape, got.type} == {b.shape, {:f, 64}}
          assert_residual(a, host(got), b, 1.0e-13 * n)

          got =
            native(fn -> Nx.LinAlg.solve(vk(Nx.as_type(a, :f32)), vk(Nx.as_type(b, :f32))) end)

          assert {got.shape, got.type} == {b.shape, {:f, 32}}
          assert_residual(Nx.as_type(Nx.as_type(a, :f32), :f64), host(got), b, 1.0e-5 * n)
        end

        # Integer inputs take f32, as Nx's output type.
        a = Nx.tensor([[3, 1], [1, 2]])
        got = native(fn -> Nx.LinAlg.solve(vk(a), vk(Nx.tensor([9, 8]))) end)
        assert_close(got, Nx.tensor([2.0, 3.0], type: :f64), {:f, 32}, 1.0e-6)

        # Inside defn.
        fun = Nx.Defn.jit(&Nx.LinAlg.solve/2, compiler: Nx.Defn.Evaluator)

        got =
          native(fn -> fun.(vk(Nx.as_type(a, :f64)), vk(Nx.tensor([9.0, 8.0], type: :f64))) end)

        assert_close(got, Nx.tensor([2.0, 3.0], type: :f64), {:f, 64}, 1.0e-14)
      end

      test "solve of a singular matrix raises Nx's error; the inputs survive" do
        a = vk(Nx.tensor([[1.0, 2.0], [2.0, 4.0]]))
        b = vk(Nx.tensor([1.0, 2.0]))

        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          native(fn -> Nx.LinAlg.solve(a, b) end)
        end

        assert Nx.to_flat_list(host(a)) == [1.0, 2.0, 2.0, 4.0]
        assert Nx.to_flat_list(host(b)) == [1.0, 2.0]

        # One singular system of a batch raises too; with :singular_check
        # false the solve returns non-finite values instead.
        a2 = vk(Nx.tensor([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 4.0]]]))
        b2 = vk(Nx.tensor([[3.0, 4.0], [1.0, 1.0]]))

        assert_raise ArgumentError, "can't solve for singular matrix", fn ->
          native(fn -> Nx.LinAlg.solve(a2, b2) end)
        end

        previous = Application.get_env(:nx_vulkan, :singular_check)
        Application.put_env(:nx_vulkan, :singular_check, false)

        try do
          [[x0, x1], rest] = native(fn -> Nx.LinAlg.solve(a2, b2) end) |> host() |> Nx.to_list()
          assert_in_delta x0, 1.0, 1.0e-6
          assert_in_delta x1, 1.0, 1.0e-6
          assert Enum.any?(rest, &(&1 in [:infinity, :neg_infinity, :nan]))
        after
          if previous == nil,
            do: Application.delete_env(:nx_vulkan, :singular_check),
            else: Application.put_env(:nx_vulkan, :singular_check, previous)
        end
      end

      test "determinant of every order on the device, as Nx" do
        for {batch, n} <- [{{}, 2}, {{}, 3}, {{2}, 3}, {{}, 5}, {{3}, 8}, {{}, 30}] do
          a = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
          got = native(fn -> Nx.LinAlg.determinant(vk(a)) end)
          assert_close(got, Nx.LinAlg.determinant(a), {:f, 64}, 1.0e-11, 1.0e-14)
        end

        singular =
          Nx.tensor([
            [1.0, 2.0, 3.0, 4.0],
            [2.0, 4.0, 6.0, 8.0],
            [0.0, 1.0, 0.0, 1.0],
            [1.0, 0.0, 0.0, 0.0]
          ])

        got = native(fn -> Nx.LinAlg.determinant(vk(singular)) end)
        assert Nx.to_binary(host(got)) == <<0.0::float-32-native>>

        # A zero determinant is +0.0 whatever the permutation's sign.
        got = native(fn -> Nx.LinAlg.determinant(vk(Nx.tensor([[1.0, 0.0], [3.0, 0.0]]))) end)
        assert Nx.to_binary(host(got)) == <<0.0::float-32-native>>

        # A permutation with an odd number of swaps.
        p = Nx.tensor([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
        got = native(fn -> Nx.LinAlg.determinant(vk(p)) end)
        assert Nx.to_number(host(got)) == 1.0
        p3 = Nx.tensor([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
        got = native(fn -> Nx.LinAlg.determinant(vk(p3)) end)
        assert Nx.to_number(host(got)) == -1.0
        # Integer inputs take f32; f32 computed in double, rounded once.
        assert got.type == {:f, 32}

        a = uniform({4, 6, 6}, -1.0, 1.0)
        got = native(fn -> Nx.LinAlg.determinant(vk(Nx.as_type(a, :f32))) end)
        expected = Nx.LinAlg.determinant(Nx.as_type(Nx.as_type(a, :f32), :f64))
        assert_close(got, expected, {:f, 32}, 1.0e-6, 1.0e-7)

        # An empty batch.
        empty = VB.from_binary(Nx.template({0, 3, 3}, :f32), "", [])
        got = native(fn -> Nx.LinAlg.determinant(empty) end)
        assert {got.shape, got.type} == {{0}, {:f, 32}}

        # Matrices of order 0: the empty product, 1.
        zero = VB.from_binary(Nx.template({2, 0, 0}, :f32), "", [])
        got = native(fn -> Nx.LinAlg.determinant(zero) end)
        assert Nx.to_flat_list(host(got)) == [1.0, 1.0]
      end

      test "invert (Nx's defn of determinant and solve) stays on the device" do
        for {batch, n} <- [{{}, 3}, {{4}, 6}, {{}, 40}] do
          a = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
          a = Nx.add(a, Nx.multiply(Nx.eye(n, type: :f64, backend: Nx.BinaryBackend), 3.0))
          got = native(fn -> Nx.LinAlg.invert(vk(a)) end)
          assert %VB{} = got.data
          assert {got.shape, got.type} == {a.shape, {:f, 64}}
          rank = tuple_size(a.shape)
          axes = Enum.to_list(0..(rank - 3)//1)
          eye = Nx.broadcast(Nx.eye(n, type: :f64, backend: Nx.BinaryBackend), a.shape)
          product = Nx.dot(a, [rank - 1], axes, host(got), [rank - 2], axes)
          diff = Nx.subtract(product, eye) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
          assert diff <= 1.0e-12 * n, "max |A inv(A) - I| = #{diff}"
        end
      end

      test "determinant and invert of matrices of small scale" do
        # The LU flushes entries of U below eps (1e-10) to zero: the
        # determinant factors each matrix's scale out first (a power of
        # two), so a small matrix keeps its determinant, and invert/1, which
        # checks the determinant, its inverse (Nx's own regression case).
        m = [[1, 0.5, 0.5, 0.5], [0.5, 1, 0.5, 0.5], [0.5, 0.5, 1, 0.5], [0.5, 0.5, 0.5, 1]]
        q = Nx.tensor(m, type: :f64, backend: Nx.BinaryBackend) |> Nx.multiply(1.0e-10)
        got = native(fn -> Nx.LinAlg.determinant(vk(q)) end)
        # det(m) = 0.5^3 * 2.5; the scalar 1e-10 is an f32.
        c = Nx.to_number(Nx.tensor(1.0e-10, type: :f32, backend: Nx.BinaryBackend))
        expected = Nx.tensor(0.3125 * :math.pow(c, 4), type: :f64, backend: Nx.BinaryBackend)
        assert_close(got, expected, {:f, 64}, 1.0e-14, 0.0)

        inv = native(fn -> Nx.LinAlg.invert(vk(q)) end)
        diff = Nx.dot(host(inv), q) |> Nx.subtract(Nx.eye(4)) |> Nx.abs() |> Nx.reduce_max()
        assert Nx.to_number(diff) <= 1.0e-15

        # det(c a) = c^n det(a) for scales down to where c^n leaves the
        # type's normal range, batched, in f64 and in f32.
        for {type, scales, rel} <- [
              {:f64, [0.75, 1.0e-3, 1.0e-10, 1.0e-30, 3.0e-55], 1.0e-12},
              {:f32, [0.75, 1.0e-3, 1.0e-9, 1.0e-12], 1.0e-5}
            ] do
          a = uniform({3, 5, 5}, -1.0, 1.0) |> Nx.as_type(type) |> Nx.as_type(:f64)
          det_a = Nx.LinAlg.determinant(a)

          for c <- scales do
            scaled = Nx.multiply(a, c) |> Nx.as_type(type)
            # The scaled matrix as the device gets it, in f64: c^5 det(a).
            c = Nx.to_number(Nx.divide(Nx.as_type(scaled, :f64), a)[0][0][0])
            c5 = Nx.tensor(:math.pow(c, 5), type: :f64, backend: Nx.BinaryBackend)
            expected = Nx.multiply(det_a, c5) |> Nx.as_type(type)
            got = native(fn -> Nx.LinAlg.determinant(vk(scaled)) end)
            assert_close(got, expected, {:f, if(type == :f64, do: 64, else: 32)}, rel, 0.0)
          end
        end

        # Zero, infinite and NaN matrices are not rescaled.
        for {entry, expected} <- [{0.0, 0.0}, {:infinity, :nan}, {:nan, :nan}] do
          z = Nx.broadcast(Nx.tensor(entry, type: :f64, backend: Nx.BinaryBackend), {3, 3})
          got = native(fn -> Nx.LinAlg.determinant(vk(z)) end)
          assert Nx.to_number(host(got)) == expected
        end
      end

      test "complex inputs run on the host, counted" do
        a =
          Nx.tensor(
            [
              [Complex.new(2.0, 1.0), Complex.new(1.0, 0.0)],
              [Complex.new(0.0, 1.0), Complex.new(3.0, 0.0)]
            ],
            backend: Nx.BinaryBackend
          )

        before = Map.get(Nx.Vulkan.fallbacks(), :lu, 0)
        {_p, _l, u} = Nx.LinAlg.lu(vk(a))
        assert Map.get(Nx.Vulkan.fallbacks(), :lu, 0) == before + 1
        assert %VB{} = u.data

        before = Map.get(Nx.Vulkan.fallbacks(), :determinant, 0)
        got = Nx.LinAlg.determinant(vk(a))
        assert Map.get(Nx.Vulkan.fallbacks(), :determinant, 0) == before + 1
        assert Nx.to_number(host(got)) == Nx.to_number(Nx.LinAlg.determinant(a))
      end
    end

    describe "qr" do
      # Nx's own QR on the host, in f64.
      defp host_qr(a, opts) do
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          Nx.LinAlg.qr(Nx.as_type(host(a), :f64), opts)
        end)
      end

      # Q's columns orthonormal, R upper triangular with a non-negative
      # diagonal but for row m - 1 where m <= n (nothing below it to
      # reflect), and Q R = A, within
      # tol; batched shapes flattened to one batch axis.
      defp assert_qr({q, r}, a, tol) do
        {m, n} = {elem(a.shape, tuple_size(a.shape) - 2), elem(a.shape, tuple_size(a.shape) - 1)}
        [q, r, a] = Enum.map([q, r, a], &(host(&1) |> Nx.as_type(:f64) |> batch3()))
        k = elem(q.shape, 2)
        qtq = Nx.dot(q, [1], [0], q, [1], [0])
        eye = Nx.broadcast(Nx.eye(k, type: :f64, backend: Nx.BinaryBackend), qtq.shape)
        assert max_abs(Nx.subtract(qtq, eye)) <= tol
        assert max_abs(Nx.subtract(Nx.dot(q, [2], [0], r, [1], [0]), a)) <= tol

        for row <- Nx.to_list(r),
            {line, i} <- Enum.with_index(row),
            {x, j} <- Enum.with_index(line) do
          if j < i, do: assert(x == 0.0, "R[#{i}][#{j}] = #{x}")
          if j == i and not (m <= n and i == m - 1), do: assert(x >= 0.0, "R[#{i}][#{i}] = #{x}")
        end
      end

      defp max_abs(t), do: t |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()

      test "against Nx's own QR: shapes, batches, both modes, on the device" do
        for {batch, m, n} <- [
              {{}, 1, 1},
              {{}, 3, 3},
              {{2}, 5, 3},
              {{2}, 3, 5},
              {{2, 2}, 6, 6},
              {{}, 12, 7}
            ],
            mode <- [:reduced, :complete] do
          a = uniform(Tuple.append(Tuple.append(batch, m), n), -1.0, 1.0)
          {hq, hr} = host_qr(a, mode: mode)

          {q, r} = native(fn -> Nx.LinAlg.qr(vk(a), mode: mode) end)
          assert_close(q, hq, {:f, 64}, 1.0e-12, 1.0e-12)
          assert_close(r, hr, {:f, 64}, 1.0e-12, 1.0e-12)

          {q, r} = native(fn -> Nx.LinAlg.qr(vk(Nx.as_type(a, :f32)), mode: mode) end)
          assert_close(q, hq, {:f, 32}, 1.0e-5, 1.0e-5)
          assert_close(r, hr, {:f, 32}, 1.0e-5, 1.0e-5)
        end
      end

      test "larger matrices, tall and wide, in one piece or a dispatch a reflection" do
        for {batch, m, n} <- [{{3}, 64, 64}, {{}, 70, 40}, {{}, 40, 70}, {{}, 100, 100}],
            mode <- [:reduced, :complete] do
          a = uniform(Tuple.append(Tuple.append(batch, m), n), -1.0, 1.0)
          k = if mode == :complete, do: m, else: min(m, n)
          {q, r} = native(fn -> Nx.LinAlg.qr(vk(a), mode: mode) end)

          assert {q.shape, r.shape} ==
                   {Tuple.append(Tuple.append(batch, m), k),
                    Tuple.append(Tuple.append(batch, k), n)}

          assert_qr({q, r}, a, 1.0e-12 * max(m, n))
          {q, r} = native(fn -> Nx.LinAlg.qr(vk(Nx.as_type(a, :f32)), mode: mode) end)
          assert {q.type, r.type} == {{:f, 32}, {:f, 32}}
          assert_qr({q, r}, Nx.as_type(a, :f32), 2.0e-6 * max(m, n))
        end
      end

      test "types, eps, views and vectorized axes" do
        a = Nx.tensor([[1, 2], [3, 4], [5, 6]])
        {q, r} = native(fn -> Nx.LinAlg.qr(vk(a)) end)
        assert {q.type, r.type} == {{:f, 32}, {:f, 32}}
        {hq, hr} = host_qr(a, [])
        assert_close(q, hq, {:f, 32}, 1.0e-6, 1.0e-6)
        assert_close(r, hr, {:f, 32}, 1.0e-6, 1.0e-6)

        for type <- [:f16, :bf16] do
          {q, r} = native(fn -> Nx.LinAlg.qr(vk(Nx.as_type(a, type))) end)

          assert {q.type, r.type} == {Nx.Type.normalize!(type), Nx.Type.normalize!(type)}

          assert_close(q, hq, Nx.Type.normalize!(type), 1.0e-2, 1.0e-2)
        end

        # Entries below the diagonal under sqrt(eps): the column is left
        # alone (Nx's identity reflection), its small entries kept.
        s = Nx.tensor([[2.0, 1.0], [1.0e-6, 3.0]], type: :f64)
        {q, r} = native(fn -> Nx.LinAlg.qr(vk(s), eps: 1.0e-10) end)
        assert Nx.to_list(host(q)) == [[1.0, 0.0], [0.0, 1.0]]
        assert Nx.to_list(host(r)) == [[2.0, 1.0], [1.0e-6, 3.0]]

        {_q, r} =
          native(fn ->
            Nx.LinAlg.qr(vk(Nx.tensor([[2.0, 1.0], [1.0e-6, 3.0], [0.0, 1.0]], type: :f64)),
              eps: 1.0e-20
            )
          end)

        assert Nx.to_number(host(r)[1][0]) == 0.0

        # A transposed view, and vectorized axes.
        b = uniform({2, 5, 4}, -1.0, 1.0)
        {q, r} = native(fn -> Nx.LinAlg.qr(Nx.transpose(vk(b), axes: [0, 2, 1])) end)
        {hq, hr} = host_qr(Nx.transpose(b, axes: [0, 2, 1]), [])
        assert_close(q, hq, {:f, 64}, 1.0e-12, 1.0e-12)
        assert_close(r, hr, {:f, 64}, 1.0e-12, 1.0e-12)
        {q, r} = native(fn -> Nx.LinAlg.qr(Nx.vectorize(vk(b), :x)) end)
        assert q.vectorized_axes == [x: 2] and r.vectorized_axes == [x: 2]
        {hq, hr} = host_qr(b, [])
        assert_close(Nx.devectorize(q, keep_names: false), hq, {:f, 64}, 1.0e-12, 1.0e-12)
        assert_close(Nx.devectorize(r, keep_names: false), hr, {:f, 64}, 1.0e-12, 1.0e-12)
      end

      test "Nx's examples, f32 results rounded once from double" do
        t = Nx.tensor([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]], type: :f32)
        {q, r} = native(fn -> Nx.LinAlg.qr(vk(t), mode: :reduced) end)
        # Nx's f32 arithmetic prints 0.7071068286895752 for Q[2][2] and
        # 1.4142136573791504 for R[2][2]; these are the nearest f32 values.
        s = 0.7071067690849304

        assert Nx.to_list(host(q)) == [
                 [1.0, 0.0, 0.0],
                 [0.0, 1.0, 0.0],
                 [0.0, 0.0, s],
                 [0.0, 0.0, s]
               ]

        assert Nx.to_list(host(r)) == [
                 [3.0, 2.0, 1.0],
                 [0.0, 1.0, 1.0],
                 [0.0, 0.0, 1.4142135381698608]
               ]

        t = Nx.tensor([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]], type: :f32)
        {q, r} = native(fn -> Nx.LinAlg.qr(vk(t), mode: :complete) end)
        assert Nx.to_list(host(q)) == Nx.to_list(Nx.eye(4))

        assert Nx.to_list(host(r)) == [
                 [3.0, 2.0, 1.0],
                 [0.0, 1.0, 1.0],
                 [0.0, 0.0, 1.0],
                 [0.0, 0.0, 0.0]
               ]

        # Already upper triangular: identity reflections keep the signs.
        t = Nx.tensor([[[-3, 2, 1], [0, 1, 1], [0, 0, -1]], [[3, 2, 1], [0, 1, 1], [0, 0, 1]]])
        {qs, rs} = native(fn -> Nx.LinAlg.qr(Nx.vectorize(vk(t), x: 2)) end)
        assert {qs.vectorized_axes, qs.type} == {[x: 2], {:f, 32}}

        assert Nx.to_list(host(Nx.devectorize(qs))) ==
                 Nx.to_list(Nx.broadcast(Nx.eye(3), {2, 3, 3}))

        assert Nx.to_list(host(Nx.devectorize(rs))) ==
                 Nx.to_list(Nx.as_type(t, :f32))
      end

      test "inside defn the Evaluator calls the backend; gradients run" do
        a = uniform({4, 3}, -1.0, 1.0)
        {q, r} = native(fn -> Nx.Defn.jit(&Nx.LinAlg.qr/1).(vk(a)) end)
        {hq, hr} = host_qr(a, [])
        assert_close(q, hq, {:f, 64}, 1.0e-12, 1.0e-12)
        assert_close(r, hr, {:f, 64}, 1.0e-12, 1.0e-12)

        loss = fn t ->
          Nx.Defn.grad(t, fn x ->
            {q, r} = Nx.LinAlg.qr(x)
            Nx.add(Nx.sum(q), Nx.sum(r))
          end)
        end

        expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> loss.(a) end)
        assert_close(loss.(vk(a)), expected, {:f, 64}, 1.0e-10, 1.0e-10)
      end

      test "complex inputs run on the host, counted; bad inputs raise Nx's errors" do
        a =
          Nx.tensor(
            [
              [Complex.new(2.0, 1.0), Complex.new(1.0, 0.0)],
              [Complex.new(0.0, 1.0), Complex.new(3.0, 0.0)]
            ],
            backend: Nx.BinaryBackend
          )

        before = Map.get(Nx.Vulkan.fallbacks(), :qr, 0)
        {q, _r} = Nx.LinAlg.qr(vk(a))
        assert Map.get(Nx.Vulkan.fallbacks(), :qr, 0) == before + 1
        assert %VB{} = q.data

        assert_raise ArgumentError, ~r/rank 2/, fn -> Nx.LinAlg.qr(vk(Nx.tensor([1.0, 2.0]))) end

        assert_raise ArgumentError, ~r/invalid :mode/, fn ->
          Nx.LinAlg.qr(vk(Nx.eye(2)), mode: :full)
        end
      end
    end

    describe "eigh" do
      # Nx.BinaryBackend's own result, computed on the host.
      defp host_linalg(fun, a),
        do: Nx.with_default_backend(Nx.BinaryBackend, fn -> fun.(host(a)) end)

      # A batch of symmetric matrices Q diag(l) Q^T with eigenvalues of
      # distinct magnitudes (+-3, +-1.5, +-0.75, ..., signs alternating),
      # on which Nx's QR iteration converges; f64 on the host.
      defp separated(batch, n) do
        g = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
        {q, _} = host_linalg(&Nx.LinAlg.qr/1, g)
        l = for k <- 0..(n - 1), do: 3.0 * :math.pow(-0.5, k)
        rank = tuple_size(g.shape)
        axes = Enum.to_list(0..(rank - 3)//1)
        ql = Nx.multiply(q, Nx.tensor(l, type: :f64, backend: Nx.BinaryBackend))
        Nx.dot(ql, [rank - 1], axes, q, [rank - 1], axes)
      end

      test "as Nx.BinaryBackend computes it, on the device: orders, batches, types" do
        for {batch, n} <- [{{}, 1}, {{}, 2}, {{3}, 3}, {{2, 2}, 5}, {{}, 8}] do
          a = separated(batch, n)
          {hv, he} = host_linalg(&Nx.LinAlg.eigh/1, a)
          {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a)) end)
          assert_close(v, hv, {:f, 64}, 1.0e-9, 1.0e-9)
          assert_close(e, he, {:f, 64}, 1.0e-9, 1.0e-9)

          # A :max_iter past the kernel's 65536 steps takes the device ops
          # instead (a reflection, then a step at a time): the same results,
          # as these converge long before either bound.
          {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a), max_iter: 70_000) end)
          assert_close(v, hv, {:f, 64}, 1.0e-9, 1.0e-9)
          assert_close(e, he, {:f, 64}, 1.0e-9, 1.0e-9)

          a32 = Nx.as_type(a, :f32)
          {hv, he} = host_linalg(&Nx.LinAlg.eigh/1, a32)
          {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a32)) end)
          assert_close(v, hv, {:f, 32}, 1.0e-6, 1.0e-6)
          assert_close(e, he, {:f, 32}, 1.0e-6, 1.0e-6)
        end

        # Integers give f32; options pass through.
        a = Nx.tensor([[2, 1], [1, 2]])
        {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a), eps: 1.0e-8, max_iter: 50) end)
        {hv, he} = host_linalg(&Nx.LinAlg.eigh(&1, eps: 1.0e-8, max_iter: 50), a)
        assert_close(v, hv, {:f, 32}, 1.0e-6, 1.0e-6)
        assert_close(e, he, {:f, 32}, 1.0e-6, 1.0e-6)

        # Nx's own example, vectorized.
        t = Nx.tensor([[[2, 5], [5, 6]], [[1, 0], [0, 4]]]) |> Nx.vectorize(x: 2)
        {v, e} = native(fn -> Nx.LinAlg.eigh(vk(Nx.devectorize(t)) |> Nx.vectorize(x: 2)) end)
        assert v.vectorized_axes == [x: 2]
        assert Nx.to_list(Nx.round(host(Nx.devectorize(v)))) == [[9.0, -1.0], [1.0, 4.0]]

        assert Nx.to_list(host(Nx.devectorize(e))) == [
                 [
                   [0.5612090229988098, -0.8276740908622742],
                   [0.8276740908622742, 0.5612090229988098]
                 ],
                 [[1.0, 0.0], [0.0, 1.0]]
               ]
      end

      test "random symmetric matrices, converged or not, as Nx.BinaryBackend's" do
        for {batch, n} <- [{{4}, 4}, {{}, 8}] do
          g = uniform(Tuple.append(Tuple.append(batch, n), n), -1.0, 1.0)
          rank = tuple_size(g.shape)
          axes = Enum.to_list(0..(rank - 3)//1) ++ [rank - 1, rank - 2]
          a = Nx.divide(Nx.add(g, Nx.transpose(g, axes: axes)), 2)
          {hv, he} = host_linalg(&Nx.LinAlg.eigh(&1, max_iter: 200), a)
          {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a), max_iter: 200) end)
          assert_close(v, hv, {:f, 64}, 1.0e-8, 1.0e-8)
          assert_close(e, he, {:f, 64}, 1.0e-8, 1.0e-8)

          # Nx.BinaryBackend iterates over 1..max_iter, which counts down
          # below 1: 2 - max_iter iterations.
          for max_iter <- [0, -1] do
            {hv, he} = host_linalg(&Nx.LinAlg.eigh(&1, max_iter: max_iter), a)
            {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a), max_iter: max_iter) end)
            assert_close(v, hv, {:f, 64}, 1.0e-12, 1.0e-12)
            assert_close(e, he, {:f, 64}, 1.0e-12, 1.0e-12)
          end
        end
      end

      test "eigenvalues of close magnitude: max_iter iterations, finite results" do
        # +-1 eigenvalue pairs never separate in an unshifted QR iteration.
        a = Nx.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], type: :f64)
        {v, e} = native(fn -> Nx.LinAlg.eigh(vk(a), max_iter: 20) end)
        assert {v.shape, e.shape} == {{3}, {3, 3}}
        assert Enum.all?(Nx.to_flat_list(host(v)) ++ Nx.to_flat_list(host(e)), &is_float/1)
        assert 2.0 in Nx.to_flat_list(host(v))
      end

      test "a matrix that is not symmetric raises Nx's error; complex on the host" do
        a = vk(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))

        assert_raise ArgumentError, ~r/matrix must be hermitian/, fn ->
          native(fn -> Nx.LinAlg.eigh(a) end)
        end

        assert Nx.to_list(host(a)) == [[1.0, 2.0], [3.0, 4.0]]

        c =
          Nx.tensor(
            [
              [Complex.new(2.0, 0.0), Complex.new(0.0, 1.0)],
              [Complex.new(0.0, -1.0), Complex.new(2.0, 0.0)]
            ],
            backend: Nx.BinaryBackend
          )

        before = Map.get(Nx.Vulkan.fallbacks(), :eigh, 0)
        {v, _e} = Nx.LinAlg.eigh(vk(c))
        assert Map.get(Nx.Vulkan.fallbacks(), :eigh, 0) == before + 1
        assert %VB{} = v.data
      end
    end

    describe "svd" do
      # Nx's default implementation (Nx.LinAlg.SVD) on Nx.BinaryBackend:
      # the reference the device replicates.
      defp host_svd(a, opts \\ []),
        do: Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.LinAlg.svd(host(a), opts) end)

      # A batch of m x n matrices U diag(s) V^T, U and V with orthonormal
      # columns, s = 3 ratio^k (distinct magnitudes, on which the unshifted
      # QR iteration of eigh converges), f64 on the host.
      defp conditioned(batch, m, n, ratio \\ 0.5) do
        k = min(m, n)

        {u, _} =
          host_linalg(
            &Nx.LinAlg.qr/1,
            uniform(Tuple.append(Tuple.append(batch, m), k), -1.0, 1.0)
          )

        {v, _} =
          host_linalg(
            &Nx.LinAlg.qr/1,
            uniform(Tuple.append(Tuple.append(batch, n), k), -1.0, 1.0)
          )

        s = for i <- 0..(k - 1), do: 3.0 * :math.pow(ratio, i)
        rank = tuple_size(u.shape)
        axes = Enum.to_list(0..(rank - 3)//1)
        us = Nx.multiply(u, Nx.tensor(s, type: :f64, backend: Nx.BinaryBackend))
        Nx.dot(us, [rank - 1], axes, v, [rank - 1], axes)
      end

      # The device's {U, S, V^T} equal the reference's: each within tol
      # (relative and absolute), in type type.
      defp assert_svd(got, expected, type, tol) do
        for {g, e} <- Enum.zip(Tuple.to_list(got), Tuple.to_list(expected)) do
          assert g.names == e.names
          assert_close(g, Nx.as_type(e, :f64), type, tol, tol)
        end
      end

      test "square, tall, wide, batches, both modes: the reference's results" do
        # 7 x 5 and 4 x 9 are reduced by QR in both modes, 9 x 8 only with
        # :full_matrices? (9 <= 1.15 * 8).
        for {batch, m, n} <- [
              {{}, 1, 1},
              {{}, 4, 4},
              {{}, 7, 5},
              {{}, 9, 8},
              {{2}, 3, 5},
              {{}, 4, 9},
              {{2, 2}, 4, 3}
            ],
            full <- [true, false] do
          a = conditioned(batch, m, n)
          opts = [full_matrices?: full]
          got = native(fn -> Nx.LinAlg.svd(vk(a), opts) end)
          assert_svd(got, host_svd(a, opts), {:f, 64}, 1.0e-10)

          a32 = Nx.as_type(a, :f32)
          got = native(fn -> Nx.LinAlg.svd(vk(a32), opts) end)
          assert_svd(got, host_svd(a32, opts), {:f, 32}, 1.0e-4)
        end
      end

      test "random matrices, whose eigh may stop before converging, as the reference" do
        for shape <- [{3, 5, 5}, {8, 6}, {6, 8}] do
          a = uniform(shape, -1.0, 1.0)
          got = native(fn -> Nx.LinAlg.svd(vk(a)) end)
          assert_svd(got, host_svd(a), {:f, 64}, 1.0e-8)

          # f32 rounding moves H, and so where eigh stops, by a little.
          a32 = Nx.as_type(a, :f32)
          {u, s, vt} = native(fn -> Nx.LinAlg.svd(vk(a32)) end)
          {hu, hs, hvt} = host_svd(a32)
          assert_close(s, Nx.as_type(hs, :f64), {:f, 32}, 1.0e-4, 1.0e-4)
          assert_close(u, Nx.as_type(hu, :f64), {:f, 32}, 1.0e-2, 1.0e-2)
          assert_close(vt, Nx.as_type(hvt, :f64), {:f, 32}, 1.0e-2, 1.0e-2)
        end
      end

      test ":max_iter bounds QDWH's and eigh's iterations (at least one)" do
        a = uniform({2, 5, 5}, 0.0, 1.0)

        for max_iter <- [0, 1, 2, 3, 6] do
          got = native(fn -> Nx.LinAlg.svd(vk(a), max_iter: max_iter) end)
          assert_svd(got, host_svd(a, max_iter: max_iter), {:f, 64}, 1.0e-9)
        end
      end

      test "rank deficiency: U re-orthogonalized by QR, zero columns where R's diagonal is 0" do
        # eigh leaves the diagonal H in its order, so its first eigenvalue
        # is 0; one QDWH iteration leaves U's columns short of unit length.
        for a <- [
              Nx.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]),
              Nx.tensor([[0.0, 3.0, 0.0], [0.0, 0.0, -2.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
            ],
            type <- [:f32, :f64],
            max_iter <- [1, 100] do
          a = Nx.as_type(a, type)
          {u, s, vt} = native(fn -> Nx.LinAlg.svd(vk(a), max_iter: max_iter) end)
          {hu, hs, hvt} = host_svd(a, max_iter: max_iter)
          assert Nx.to_list(host(u)) == Nx.to_list(hu)
          assert Nx.to_list(host(s)) == Nx.to_list(hs)
          assert Nx.to_list(host(vt)) == Nx.to_list(hvt)
        end

        assert Nx.to_list(
                 host(
                   elem(
                     native(fn ->
                       Nx.LinAlg.svd(
                         vk(Nx.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])),
                         max_iter: 1
                       )
                     end),
                     0
                   )
                 )
               ) ==
                 [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]

        # A matrix of rank 1: its singular values and first singular
        # vectors (the others span the null spaces, noise decides them).
        a =
          Nx.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0], [1.0, 2.0, 3.0]],
            type: :f64
          )

        {u, s, vt} = native(fn -> Nx.LinAlg.svd(vk(a)) end)
        {hu, hs, hvt} = host_svd(a)
        assert_close(s, hs, {:f, 64}, 1.0e-12, 1.0e-12)

        assert_close(
          Nx.slice_along_axis(u, 0, 1, axis: 1),
          hu[[.., 0..0]],
          {:f, 64},
          1.0e-12,
          1.0e-12
        )

        assert_close(vt[0], hvt[0], {:f, 64}, 1.0e-12, 1.0e-12)
      end

      test "matrices of zeros: identities and zero singular values, per matrix of a batch" do
        for {shape, full} <- [{{3, 4}, true}, {{3, 4}, false}, {{5, 2}, false}, {{2, 2, 2}, true}] do
          a = Nx.broadcast(Nx.tensor(0.0, backend: Nx.BinaryBackend), shape)
          {u, s, vt} = native(fn -> Nx.LinAlg.svd(vk(a), full_matrices?: full) end)
          {hu, hs, hvt} = host_svd(a, full_matrices?: full)
          assert {u.shape, s.shape, vt.shape} == {hu.shape, hs.shape, hvt.shape}
          assert Nx.to_list(host(u)) == Nx.to_list(hu)
          assert Nx.to_list(host(s)) == Nx.to_list(hs)
          assert Nx.to_list(host(vt)) == Nx.to_list(hvt)
        end

        # A zero matrix between two others; integer zeros give f32.
        a = Nx.stack([conditioned({}, 4, 3), Nx.broadcast(0.0, {4, 3}), conditioned({}, 4, 3)])

        for full <- [true, false] do
          got = native(fn -> Nx.LinAlg.svd(vk(a), full_matrices?: full) end)
          expected = host_svd(a, full_matrices?: full)
          assert_svd(got, expected, {:f, 64}, 1.0e-10)
          assert Nx.to_list(host(elem(got, 1))[1]) == [0.0, 0.0, 0.0]
        end

        {u, s, _} = native(fn -> Nx.LinAlg.svd(vk(Nx.tensor([[0, 0], [0, 0]]))) end)

        assert {u.type, Nx.to_list(host(u)), Nx.to_list(host(s))} ==
                 {{:f, 32}, [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]}
      end

      test "types: f16 and bf16 as Nx computes them, integers as f32; names, views, vectorized axes" do
        for {shape, type, tol} <- [{{4, 4}, :f16, 2.0e-3}, {{5, 3}, :bf16, 2.0e-2}] do
          a = Nx.as_type(conditioned({}, elem(shape, 0), elem(shape, 1)), type)
          got = native(fn -> Nx.LinAlg.svd(vk(a)) end)
          assert_svd(got, host_svd(a), Nx.Type.normalize!(type), tol)
        end

        a = Nx.tensor([[1, 2], [3, 4], [5, 7]], type: :s32, names: [:rows, :cols])
        got = native(fn -> Nx.LinAlg.svd(vk(a)) end)
        assert Enum.map(Tuple.to_list(got), & &1.names) == [[nil, nil], [nil], [nil, nil]]
        assert_svd(got, host_svd(a), {:f, 32}, 1.0e-5)

        # A transposed view; vectorized axes.
        b = conditioned({2}, 5, 3)
        view = Nx.transpose(vk(b), axes: [0, 2, 1])
        got = native(fn -> Nx.LinAlg.svd(view, full_matrices?: false) end)
        expected = host_svd(Nx.transpose(b, axes: [0, 2, 1]), full_matrices?: false)
        assert_svd(got, expected, {:f, 64}, 1.0e-10)

        {u, s, vt} = native(fn -> Nx.LinAlg.svd(Nx.vectorize(vk(b), :x)) end)
        assert Enum.map([u, s, vt], & &1.vectorized_axes) == [[x: 2], [x: 2], [x: 2]]
        assert {u.shape, s.shape, vt.shape} == {{5, 5}, {3}, {3, 3}}
        {hu, hs, hvt} = host_svd(Nx.vectorize(b, :x))
        got = Enum.map([u, s, vt], &Nx.devectorize(&1, keep_names: false))
        expected = Enum.map([hu, hs, hvt], &Nx.devectorize(&1, keep_names: false))
        assert_svd(List.to_tuple(got), List.to_tuple(expected), {:f, 64}, 1.0e-10)
      end

      test "larger matrices, where the host would take minutes: U diag(s) V^T = A" do
        # Nx's algorithm is only this accurate: eigh stops once its Q moves
        # by at most 1.0e-4 and flushes entries under 1.0e-4 (the reference
        # is as far from the exact values on a 12 x 8 matrix).
        for {m, n} <- [{48, 32}, {20, 40}], type <- [:f64, :f32], full <- [true, false] do
          k = min(m, n)
          a = Nx.as_type(conditioned({}, m, n, 0.8), type)
          {u, s, vt} = native(fn -> Nx.LinAlg.svd(vk(a), full_matrices?: full) end)
          assert {u.type, s.type, vt.type} == {Nx.Type.normalize!(type), a.type, a.type}
          [u, s, vt, a] = Enum.map([u, s, vt, a], &(host(&1) |> Nx.as_type(:f64)))
          exact = for i <- 0..(k - 1), do: 3.0 * :math.pow(0.8, i)
          assert_close(vk(s), Nx.tensor(exact, type: :f64), {:f, 64}, 0.0, 2.0e-2)

          rebuilt =
            u
            |> Nx.slice([0, 0], [m, k])
            |> Nx.multiply(s)
            |> Nx.dot(Nx.slice(vt, [0, 0], [k, n]))

          assert_close(vk(rebuilt), a, {:f, 64}, 0.0, 2.0e-2)

          for q <- [Nx.dot(Nx.transpose(u), u), Nx.dot(vt, Nx.transpose(vt))] do
            {size, _} = q.shape
            assert_close(vk(q), Nx.eye(size, type: :f64), {:f, 64}, 0.0, 2.0e-3)
          end
        end
      end

      test "empty matrices: the zero case's identities" do
        {u, s, vt} =
          native(fn -> Nx.LinAlg.svd(VB.from_binary(Nx.template({2, 0, 3}, :f32), "", [])) end)

        assert {u.shape, s.shape} == {{2, 0, 0}, {2, 0}}
        assert Nx.to_list(host(vt)) == Nx.to_list(Nx.broadcast(Nx.eye(3), {2, 3, 3}))

        {u, s, vt} =
          native(fn ->
            Nx.LinAlg.svd(VB.from_binary(Nx.template({0, 3, 2}, :f32), "", []),
              full_matrices?: false
            )
          end)

        assert {u.shape, s.shape, vt.shape} == {{0, 3, 2}, {0, 2}, {0, 2, 2}}
      end

      test "inside defn the Evaluator calls the backend: jit, pinv, matrix_rank" do
        a = conditioned({}, 4, 3)
        got = native(fn -> Nx.Defn.jit(&Nx.LinAlg.svd/1).(vk(a)) end)
        assert_svd(got, host_svd(a), {:f, 64}, 1.0e-10)

        expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.LinAlg.pinv(a) end)
        assert_close(native(fn -> Nx.LinAlg.pinv(vk(a)) end), expected, {:f, 64}, 1.0e-9, 1.0e-9)

        b = Nx.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
        assert Nx.to_number(host(native(fn -> Nx.LinAlg.matrix_rank(vk(b)) end))) == 2
      end

      test "complex inputs raise Nx's error before reaching a backend" do
        c = Nx.tensor([[Complex.new(1.0, 1.0), 0.0], [0.0, 1.0]], backend: Nx.BinaryBackend)
        before = Nx.Vulkan.fallbacks()

        assert_raise ArgumentError, ~r/not yet implemented for complex inputs/, fn ->
          Nx.LinAlg.svd(vk(c))
        end

        assert Nx.Vulkan.fallbacks() == before
      end
    end
  end
else
  defmodule Nx.Vulkan.LinAlgTest do
    use ExUnit.Case
    @moduletag :nx

    test "linear algebra tests need Nx"
  end
end
