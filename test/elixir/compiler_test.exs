if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.CompilerTest do
    # Nx.Vulkan.Compiler must give the Evaluator's results bit for bit on
    # the first call (evaluated and captured) and on every replay, for
    # plannable functions and for those it must leave to the Evaluator.
    use ExUnit.Case, async: false
    @moduletag :nx

    import Nx.Defn

    alias Nx.Vulkan.Compiler

    @vk Nx.Vulkan.Backend

    defn loss(w, b, x, y) do
      logits = Nx.dot(x, w) + b
      shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
      log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
      Nx.mean(-Nx.sum(y * log_probs, axes: [1]))
    end

    defn step(w, b, x, y) do
      {l, {gw, gb}} = value_and_grad({w, b}, fn {w, b} -> loss(w, b, x, y) end)
      {w - 0.1 * gw, b - 0.1 * gb, l}
    end

    defn with_constants(x) do
      {x * 2 + Nx.iota({3}) - 0.5, Nx.iota({2, 2}) + 1, x}
    end

    defn glue(a, b) do
      Nx.concatenate([a, Nx.reverse(b), a]) |> Nx.put_slice([1], Nx.tensor([9.0]))
    end

    defn counted_loop(x) do
      {x, _i} = while({x, i = 0}, i < 3, do: {x * 2, i + 1})
      x
    end

    # A sampler's shape: random numbers (Nx.Random's loops), a loop and a
    # branch on a counter, all decided on the host.
    defn counter_loops(q, key) do
      {p, key} = Nx.Random.normal(key, shape: Nx.shape(q))

      {_, q, _} =
        while {i = 0, q, p}, i < 4 do
          q = if rem(i, 2) == 0, do: q + 0.5 * p, else: q * 0.9
          {i + 1, q, p}
        end

      {u, key} = Nx.Random.uniform(key)
      {q, u, key}
    end

    # A chain of integer ops, threefry's round among them.
    defn int_chain(x, y) do
      z = Nx.bitwise_xor(x + y, Nx.left_shift(y, 13) |> Nx.bitwise_or(Nx.right_shift(y, 19)))
      z = Nx.max(z * 3 - x, Nx.quotient(y, 7)) |> Nx.bitwise_and(Nx.bitwise_not(x))
      Nx.select(z > y, Nx.abs(z), Nx.remainder(z, 5) + Nx.negate(y))
    end

    # Numbers that programs take as literals (floats an f16 holds
    # exactly, a negative zero among them), and one that is not (0.1).
    defn literal_chain(x) do
      y = 2.0 * x + 0.5
      z = (y - 3) * -0.0 + y / 0.25
      Nx.select(z < 1.5, z * 0.1, Nx.max(z, -2.0))
    end

    defn(random_bits(key), do: Nx.Random.uniform(key, shape: {1000}))

    # A scalar computed from a scalar argument and broadcast (a step size,
    # a key word), cheap and costly.
    # Concatenations and stacks of fused programs' results: along the
    # first axis each program writes its block (blocks/2, stacked/2; x is
    # no program's and is copied); along another axis (side_by_side/2) the
    # copies stay, and so does the copy of a block that is also returned
    # (shared_block/2).
    defn blocks(x, y) do
      Nx.concatenate([x * y + x, Nx.abs(y - x) * 3, x])
    end

    defn(stacked(x, y), do: Nx.stack([x * y - y, x + y * 2]))

    # Programs reading a whole concatenation or stack whose blocks
    # programs write: folded into those programs (Fusion.fold_readers/4).
    defn(read_blocks(x, y, s), do: Nx.concatenate([x * y + x, Nx.abs(y - x) * 3]) * s - 1)
    defn(read_stack(x, y), do: Nx.negate(Nx.stack([x * y - y, x + y * 2])))

    # One element sliced out and read as a number: the slice is a read of
    # the program at that element's offset.
    defn one_element(x, y) do
      s = Nx.squeeze(Nx.slice(x, [2, 3], [1, 1]))
      s * 3 - s * s + y
    end

    defn read_output(x, y) do
      c = Nx.concatenate([x * y + x, x - y * 2])
      {c * 2 + 1, c}
    end

    defn(side_by_side(x, y), do: Nx.concatenate([x * y + x, x - y * 2], axis: 1))

    defn shared_block(x, y) do
      a = x * y + x
      {Nx.concatenate([a, y - x * 2]), a}
    end

    # Concatenations of constants (no argument in them) are constants of
    # the plan: const_blocks/1 replays its one product, const_output/1
    # returns such a concatenation besides x + 1.
    defn const_blocks(x) do
      c = Nx.concatenate([Nx.iota({2}, type: :f32), Nx.tensor([7.0, -0.5, 3.0])])
      x * Nx.reverse(c)
    end

    defn const_output(x) do
      {x + 1, Nx.stack([Nx.iota({3}), Nx.iota({3}) * 2])}
    end

    defn scalar_cheap(x, s) do
      t = s * 2.0 + 1.0
      x * t - t
    end

    defn(scalar_costly(x, s), do: x * Nx.exp(s) + 1.0)

    # A loop whose condition reads device data.
    defn doubling(x) do
      {x, _} = while({x, i = 0}, Nx.sum(x) < 100 and i < 50, do: {x * 2, i + 1})
      x
    end

    defn add_ones(x) do
      {x, _} = while({x, i = 0}, i < 40, do: {x + 1.0, i + 1})
      x
    end

    defn branch(x) do
      if Nx.sum(x) > 0, do: x + 1, else: x - 1
    end

    defn hooked(x) do
      hook(x * 3, :seen) + 1
    end

    defn two(a, b) do
      a * b + a
    end

    defn custom_reduce(x) do
      Nx.reduce(x, 1.0, fn a, b -> a * b + 1 end)
    end

    defn relu_loss(w1, b1, w2, x) do
      h = Nx.max(Nx.dot(x, w1) + b1, 0.0)
      Nx.sum(Nx.tanh(Nx.dot(h, w2)))
    end

    defn relu_step(w1, b1, w2, x) do
      {l, {g1, gb1, g2}} =
        value_and_grad({w1, b1, w2}, fn {w1, b1, w2} -> relu_loss(w1, b1, w2, x) end)

      {w1 - 0.05 * g1, b1 - 0.05 * gb1, w2 - 0.05 * g2, l}
    end

    # One elementwise tree over 14 distinct inputs, broadcast and
    # transposed ones among them: more than one fused program can read.
    defn wide(a, b, c, d, e, f, g, h, i, j, k, l, m, n) do
      t = ((a + b) * c - d) / (Nx.abs(e) + 2.0) + Nx.transpose(f) * g
      t = t - h + i * j - Nx.exp(k) + l * m
      Nx.select(t > n, t, -t)
    end

    # 37 dependent elementwise ops: more than one program holds. (A plain
    # function, jitted by the test.)
    def long_chain(x, y) do
      Enum.reduce(1..12, x, fn i, acc -> Nx.sin(Nx.add(Nx.multiply(acc, y), i)) end)
      |> Nx.subtract(y)
    end

    # x * y read by two elementwise trees (recomputed in both), and by a
    # reduction too (kept).
    defn shared_product(x, y) do
      s = x * y
      {Nx.exp(s) + 1, Nx.sin(s) - y}
    end

    defn shared_and_reduced(x, y) do
      s = x * y
      {Nx.exp(s) + 1, Nx.sum(s)}
    end

    # A group of three cheap elementwise ops read by two elementwise trees
    # (recomputed in both, never computed on its own), and by a reduction
    # too (computed once more for it); a group holding an exponential is
    # computed once and read by both trees.
    defn shared_group(x, y) do
      s = x * y - Nx.abs(y)
      {Nx.sin(s) + 1, s * s - x}
    end

    defn shared_group_and_reduced(x, y) do
      s = x * y - Nx.abs(y)
      {Nx.sin(s) + 1, Nx.sum(s)}
    end

    defn costly_shared_group(x, y) do
      s = Nx.exp(x * y) - y
      {Nx.sin(s) + 1, s * s - x}
    end

    # A product read densely by a chain and through views of its buffer
    # (transposed, reversed, a row broadcast) by the same chain's ops.
    defn viewed_twice(x, y) do
      b = x * y
      a = b + 1.0
      {a + Nx.transpose(b), Nx.exp(a) - Nx.reverse(b, axes: [0]), a * 2.0 - b[0]}
    end

    # A comparison of two chains, returned (a Metropolis test's flag) and
    # read by a select whose predicate it broadcasts: no program takes it.
    defn compared_chains(x, y) do
      a = Nx.log(x * x + 1.0) * 0.5
      b = Nx.negate(Nx.sum(y * y)) + Nx.sum(x)
      flag = Nx.less(Nx.sum(a), b * 2.0 - 1.0)
      {flag, Nx.select(flag, x, y)}
    end

    # Rounds of threefry's mix on u32 pairs: each round's sum is read by
    # the next round and by this round's xor, each xor by three ops of the
    # next round. (A plain function, jitted by the test.)
    def mix_rounds(a, b) do
      Enum.reduce([13, 15, 26, 6, 17, 29], {a, b}, fn r, {a, b} ->
        a = Nx.add(a, b)
        rotated = Nx.bitwise_or(Nx.left_shift(b, r), Nx.right_shift(b, 32 - r))
        {a, Nx.bitwise_xor(rotated, a)}
      end)
    end

    # Two independent chains of products, which the Evaluator runs one
    # after the other.
    defn two_chains(a, b) do
      {Nx.dot(Nx.dot(Nx.dot(a, a), a), a), Nx.dot(Nx.dot(Nx.dot(b, b), b), b)}
    end

    setup do
      Nx.default_backend(@vk)
      Nx.Defn.default_options(compiler: Compiler)
      Compiler.clear_cache()

      on_exit(fn ->
        Nx.Defn.default_options([])
        Nx.default_backend(Nx.BinaryBackend)
      end)
    end

    defp uniform(seed, shape) do
      {t, _} = Nx.Random.uniform(Nx.Random.key(seed), -1.0, 1.0, shape: shape)
      Nx.backend_copy(t, @vk)
    end

    defp bits(container) do
      [container] |> Nx.Defn.Composite.flatten_list() |> Enum.map(&{&1.shape, Nx.to_binary(&1)})
    end

    defp evaluator(fun, args), do: apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args)

    test "training steps: the first call and every replay equal the Evaluator's, bit for bit" do
      w0 = uniform(1, {12, 5})
      b0 = Nx.broadcast(Nx.tensor(0.0, backend: @vk), {5})
      x = uniform(2, {16, 12})
      y = Nx.equal(Nx.new_axis(Nx.remainder(Nx.iota({16}), 5), 1), Nx.iota({1, 5}))
      y = Nx.as_type(y, :f32)

      Enum.reduce(1..6, {w0, b0, w0, b0}, fn _, {w, b, we, be} ->
        {w2, b2, l} = step(w, b, x, y)
        {we2, be2, le} = evaluator(&step/4, [we, be, x, y])
        assert bits({w2, b2, l}) == bits({we2, be2, le})
        collecting = Nx.Defn.jit(&step/4, garbage_collect: true)
        assert bits(collecting.(w, b, x, y)) == bits({we2, be2, le})
        assert %Nx.Vulkan.Backend{} = l.data
        {w2, b2, we2, be2}
      end)

      # One expression, one plan for b of known value (zeros), one for
      # computed b.
      n0 = Compiler.cache_size()
      {w, b, _} = step(w0, b0, x, y)
      {_, _, _} = step(w, b, x, y)
      assert Compiler.cache_size() == n0
      Compiler.clear_cache()
      {w, b, _} = step(w0, b0, x, y)
      {_, _, _} = step(w, b, x, y)
      assert Compiler.cache_size() == 3
    end

    # fun's result and how much the device counter `key` grew meanwhile
    # (less what the synchronize closing the span adds itself).
    defp counted(key, fun) do
      Nx.Vulkan.synchronize()
      s0 = Nx.Vulkan.stats()[key]
      result = fun.()
      Nx.Vulkan.synchronize()
      s1 = Nx.Vulkan.stats()[key]
      Nx.Vulkan.synchronize()
      {result, 2 * s1 - s0 - Nx.Vulkan.stats()[key]}
    end

    defp ops_of(fun), do: counted(:ops_enqueued, fun)

    test "fused elementwise ops: every replay equals the Evaluator bit for bit, in fewer ops" do
      for type <- [:f32, :f64, :f16, :bf16] do
        w1 = Nx.as_type(uniform(11, {9, 33}), type)
        b1 = Nx.as_type(uniform(12, {33}), type)
        w2 = Nx.as_type(uniform(13, {33, 4}), type)
        x = Nx.as_type(uniform(14, {17, 9}), type)

        {expected, evaluated} = ops_of(fn -> evaluator(&relu_step/4, [w1, b1, w2, x]) end)

        # The same plan without fusion (the Evaluator's calls, less those
        # that depend on no argument: done once).
        Compiler.clear_cache()
        Application.put_env(:nx_vulkan, :compiler_fusion, false)

        unfused =
          try do
            assert bits(relu_step(w1, b1, w2, x)) == bits(expected)
            {got, unfused} = ops_of(fn -> relu_step(w1, b1, w2, x) end)
            assert bits(got) == bits(expected), "#{type} unfused replay differs"
            assert unfused <= evaluated, "#{type}: #{unfused} ops unfused, evaluated #{evaluated}"
            unfused
          after
            Application.delete_env(:nx_vulkan, :compiler_fusion)
            Compiler.clear_cache()
          end

        assert bits(relu_step(w1, b1, w2, x)) == bits(expected)

        for _ <- 1..3 do
          {got, replayed} = ops_of(fn -> relu_step(w1, b1, w2, x) end)
          assert bits(got) == bits(expected), "#{type} replay differs"
          # The ReLU gradient and the three updates (a multiply and a
          # subtract each) fuse: 4 ops fewer at least (10 for f32), beyond
          # the transposes and broadcasts the Evaluator's backend already
          # reads as views. In f16 and bf16 part of the step is f32
          # arithmetic on f16 or bf16 operands (Nx.select of 1.0 and 0.0,
          # in the gradient of max, is f32): those ops read their f16 or
          # bf16 operand directly (mixed-type ops), which fused programs,
          # of one type, do not take, so fewer ops are left to fuse.
          saved = if type in [:f16, :bf16], do: 1, else: 4
          assert replayed <= unfused - saved, "#{type}: #{replayed} ops, unfused #{unfused}"
        end
      end

      args =
        for {shape, seed} <-
              Enum.with_index(
                [{5, 6}, {5, 6}, {6}, {5, 1}, {5, 6}, {6, 5}, {5, 6}, {}, {5, 6}, {6}] ++
                  [{5, 6}, {5, 6}, {1, 6}, {5, 6}]
              ),
            do: uniform(20 + seed, shape)

      {expected, evaluated} = ops_of(fn -> evaluator(&wide/14, args) end)
      assert bits(apply(&wide/14, args)) == bits(expected)

      for _ <- 1..2 do
        {got, replayed} = ops_of(fn -> apply(&wide/14, args) end)
        assert bits(got) == bits(expected)
        assert replayed < evaluated
      end
    end

    test "long elementwise chains, rows and scalars fuse and match the Evaluator" do
      for {shape, seed} <- [{{7, 5}, 41}, {{1, 9}, 42}, {{}, 43}] do
        x = uniform(seed, shape)
        y = uniform(seed + 10, shape)
        chain = Nx.Defn.jit(&long_chain/2)
        {expected, evaluated} = ops_of(fn -> evaluator(&long_chain/2, [x, y]) end)
        assert bits(chain.(x, y)) == bits(expected)

        for _ <- 1..2 do
          {got, replayed} = ops_of(fn -> chain.(x, y) end)
          assert bits(got) == bits(expected), "#{inspect(shape)}"

          assert replayed * 8 <= evaluated, "#{replayed} ops of #{evaluated}"
        end
      end
    end

    test "an elementwise result read by several fused ops is recomputed in each" do
      x = uniform(51, {6, 7})
      y = uniform(52, {6, 7})

      # A product read by two trees: two fused programs, run as one
      # program of two results; then a fused op, the product (for the
      # sum) and the sum. A group of three cheap ops: two programs, one
      # pair; then two programs (one of them the group alone, for the sum),
      # one pair, and the sum. A group with an exponential: itself, and the
      # two trees as one pair.
      for {fun, want_ops} <- [
            {&shared_product/2, 1},
            {&shared_and_reduced/2, 3},
            {&shared_group/2, 1},
            {&shared_group_and_reduced/2, 2},
            {&costly_shared_group/2, 2}
          ] do
        expected = evaluator(fun, [x, y])
        assert bits(fun.(x, y)) == bits(expected)
        {got, replayed} = ops_of(fn -> fun.(x, y) end)
        assert bits(got) == bits(expected)
        assert replayed == want_ops, "#{inspect(fun)}: #{replayed} ops"
      end

      # Chained rounds whose results are each read several times: both
      # results of several rounds from one program each.
      for shape <- [{33}, {}] do
        {a, _} = Nx.Random.randint(Nx.Random.key(55), 0, 4_000_000_000, shape: shape, type: :u32)
        {b, _} = Nx.Random.randint(Nx.Random.key(56), 0, 4_000_000_000, shape: shape, type: :u32)
        {a, b} = {Nx.backend_copy(a, @vk), Nx.backend_copy(b, @vk)}
        rounds = Nx.Defn.jit(&mix_rounds/2)
        {expected, evaluated} = ops_of(fn -> evaluator(&mix_rounds/2, [a, b]) end)
        assert bits(rounds.(a, b)) == bits(expected)

        for _ <- 1..2 do
          {got, replayed} = ops_of(fn -> rounds.(a, b) end)
          assert bits(got) == bits(expected), "#{inspect(shape)}"
          assert replayed * 6 <= evaluated, "#{inspect(shape)}: #{replayed} ops of #{evaluated}"
        end
      end
    end

    # A random graph of elementwise ops over three inputs, each op reading
    # earlier values (so results are read by several ops and groups are
    # shared), some directly and some through views (reversed, a row
    # broadcast, one element read as a number), some values concatenations
    # of programs' results (blocks written in place, read by later ops),
    # some of its values returned and one summed: a function of three
    # tensors.
    defp random_graph(seed, nodes) do
      :rand.seed(:exsss, {seed, seed * 7 + 1, 3})

      ops =
        for _ <- 1..nodes do
          {Enum.random([
             :add,
             :subtract,
             :multiply,
             :max,
             :min,
             :abs,
             :exp,
             :sin,
             :select,
             :divide,
             :reverse,
             :row,
             :concat,
             :number
           ]), :rand.uniform(1_000_000), :rand.uniform(1_000_000)}
        end

      outs = Enum.take_random(3..(nodes + 2), 3)
      summed = Enum.random(3..(nodes + 2))

      fn x, y, z ->
        values =
          Enum.reduce(ops, [z, y, x], fn {op, i, j}, values ->
            n = length(values)
            a = Enum.at(values, rem(i, n))
            b = Enum.at(values, rem(j, n))

            v =
              case op do
                :abs ->
                  Nx.abs(a)

                :exp ->
                  Nx.exp(Nx.min(a, 2.0))

                :sin ->
                  Nx.sin(a)

                :select ->
                  Nx.select(Nx.greater(a, b), a, Nx.multiply(b, 0.5))

                :divide ->
                  Nx.divide(a, Nx.add(Nx.abs(b), 1.0))

                # views of a result: reversed, a row broadcast
                :reverse ->
                  Nx.add(Nx.reverse(a, axes: [0]), b)

                :row ->
                  Nx.subtract(b, a[1])

                # rows 0..1 of a * 2 - 1 above rows 2..4 of |b| + 1, then
                # scaled and shifted
                :concat ->
                  Nx.concatenate([
                    Nx.subtract(Nx.multiply(a[0..1], 2.0), 1.0),
                    Nx.add(Nx.abs(b[2..4]), 1.0)
                  ])
                  |> Nx.multiply(0.5)
                  |> Nx.subtract(0.25)

                :number ->
                  Nx.multiply(b, Nx.add(a[2][1], 0.5))

                binary ->
                  apply(Nx, binary, [a, b])
              end

            [v | values]
          end)
          |> Enum.reverse()

        {List.to_tuple(Enum.map(outs, &Enum.at(values, &1))), Nx.sum(Enum.at(values, summed))}
      end
    end

    test "a result a program computes and also reads through a view is read from its buffer" do
      for shape <- [{4, 4}, {5, 5}], type <- [:f32, :f64] do
        x = Nx.as_type(uniform(55, shape), type)
        y = Nx.as_type(uniform(56, shape), type)
        expected = evaluator(&viewed_twice/2, [x, y])
        assert bits(viewed_twice(x, y)) == bits(expected)
        assert bits(viewed_twice(x, y)) == bits(expected), "#{inspect(shape)} #{type}"
      end
    end

    test "the operands of a comparison no select takes in are fused programs" do
      for type <- [:f32, :f64] do
        x = Nx.as_type(uniform(53, {5, 7}), type)
        y = Nx.as_type(uniform(54, {5, 7}), type)
        expected = evaluator(&compared_chains/2, [x, y])
        {_, evaluated} = ops_of(fn -> evaluator(&compared_chains/2, [x, y]) end)
        assert bits(compared_chains(x, y)) == bits(expected)
        {got, replayed} = ops_of(fn -> compared_chains(x, y) end)
        assert bits(got) == bits(expected)
        # a's program and its sum; y * y, its sum and x's sum; the
        # program of the scalars on the comparison's right (four ops of
        # their own before); the comparison; the select.
        assert replayed == 8, "#{type}: #{replayed} ops, #{evaluated} evaluated"
      end
    end

    test "random graphs of shared elementwise results replay bit for bit" do
      args = for seed <- 61..63, do: uniform(seed, {5, 3})

      for seed <- 1..16 do
        fun = random_graph(seed, 8 + rem(seed * 5, 17))
        expected = evaluator(fun, args)
        {_, evaluated} = ops_of(fn -> evaluator(fun, args) end)
        compiled = Nx.Defn.jit(fun)
        assert bits(apply(compiled, args)) == bits(expected), "graph #{seed}, first call"

        for _ <- 1..2 do
          {got, replayed} = ops_of(fn -> apply(compiled, args) end)
          assert bits(got) == bits(expected), "graph #{seed}"
          assert replayed <= evaluated, "graph #{seed}: #{replayed} ops of #{evaluated}"
        end
      end
    end

    # fun's result and the calls this process made to Nx.Vulkan.NIF while
    # running it, by {name, arity}.
    defp nif_calls(fun) do
      :erlang.trace_pattern({Nx.Vulkan.NIF, :_, :_}, true, [:call_count])
      :erlang.trace(self(), true, [:call])

      result =
        try do
          fun.()
        after
          :erlang.trace(self(), false, [:call])
        end

      calls =
        for {name, arity} <- Nx.Vulkan.NIF.module_info(:exports),
            name != :module_info,
            {:call_count, n} = :erlang.trace_info({Nx.Vulkan.NIF, name, arity}, :call_count),
            is_integer(n) and n > 0,
            into: %{},
            do: {{name, arity}, n}

      :erlang.trace_pattern({Nx.Vulkan.NIF, :_, :_}, false, [:call_count])
      {result, calls}
    end

    test "a replay is one NIF call; call by call it makes the same ops and results" do
      w = uniform(41, {12, 5})
      b = uniform(42, {5})
      x = uniform(43, {16, 12})
      y = Nx.as_type(Nx.greater(uniform(44, {16, 5}), 0.5), :f32)
      q = uniform(45, {7})
      u = Nx.as_type(Nx.multiply(uniform(46, {9}), 1000.0), :u32)
      v = Nx.as_type(Nx.multiply(uniform(47, {9}), 1000.0), :u32)

      cases = [
        {&step/4, [w, b, x, y]},
        {&counter_loops/2, [q, Nx.backend_copy(Nx.Random.key(3), @vk)]},
        {&int_chain/2, [u, v]},
        {&with_constants/1, [uniform(48, {3})]}
      ]

      on_exit(fn -> Application.delete_env(:nx_vulkan, :compiler_native_replay) end)

      for {fun, args} <- cases do
        expected = bits(evaluator(fun, args))

        runs =
          for native <- [true, false] do
            Application.put_env(:nx_vulkan, :compiler_native_replay, native)
            Compiler.clear_cache()
            jitted = Nx.Defn.jit(fun, compiler: Compiler)
            {first, planning} = nif_calls(fn -> apply(jitted, args) end)
            assert bits(first) == expected
            # a plan replayed in one call has its fused programs (of one
            # result or two) prepared once, when it is made
            prepared =
              Map.has_key?(planning, {:fused_program, 3}) or
                Map.has_key?(planning, {:fused_program, 4})

            fused =
              Map.has_key?(planning, {:fused, 4}) or Map.has_key?(planning, {:fused_pair, 9})

            assert prepared == (native and fused), inspect(planning)

            if fun == (&step/4), do: assert(Map.has_key?(planning, {:fused, 4}))
            {direct, via_nif} = Nx.Vulkan.NIF.replay_counts()
            {{got, ops}, calls} = nif_calls(fn -> ops_of(fn -> apply(jitted, args) end) end)
            assert bits(got) == expected
            {direct2, via_nif2} = Nx.Vulkan.NIF.replay_counts()
            # in one call, every op but the step's products skips its NIF
            # (they take theirs); call by call, replay/2 is not called
            if native do
              assert direct2 - direct >= ops - 2 and direct2 > direct
              assert via_nif2 - via_nif == if(fun == (&step/4), do: 2, else: 0)
            else
              assert {direct2, via_nif2} == {direct, via_nif}
            end

            # the replay's own calls, less the counters' synchronize and stats
            calls = Map.drop(calls, [{:synchronize, 1}, {:device_stats, 1}])
            {ops, calls}
          end

        [{native_ops, native_calls}, {elixir_ops, elixir_calls}] = runs
        assert native_ops == elixir_ops
        assert native_ops > 0
        refute Map.has_key?(elixir_calls, {:replay, 2})

        # constant outputs are handed out as new handles, from Elixir
        assert Map.drop(native_calls, [{:tensor_info, 1}, {:reinterpret, 2}]) ==
                 %{{:replay, 2} => 1},
               inspect(native_calls)

        assert Enum.sum(Map.values(elixir_calls)) >= native_ops
      end
    end

    test "replays queue independent ops between fewer barriers, with the same results" do
      # The plan's own order, without the scheduler's reordering window
      # (which would put the Evaluator's chains side by side as well).
      Nx.Vulkan.reopen(nil, %{reorder_window: :off})
      on_exit(fn -> Nx.Vulkan.reopen() end)
      a = uniform(31, {24, 24})
      b = uniform(32, {24, 24})
      barriers = &counted(:barriers, &1)

      {expected, evaluated} = barriers.(fn -> evaluator(&two_chains/2, [a, b]) end)
      assert bits(two_chains(a, b)) == bits(expected)
      {got, replayed} = barriers.(fn -> two_chains(a, b) end)
      assert bits(got) == bits(expected)
      # Chain by chain: a barrier before each of the 2 x 2 dependent
      # products; by depth, the two chains' products side by side: 2.
      assert evaluated >= 4
      assert replayed <= 2, "#{replayed} barriers, evaluated with #{evaluated}"
    end

    test "dropped results return to the pool after :compiler_gc_bytes of results" do
      # Unfused replays: the control below needs a replay that makes as
      # little garbage as possible (fused ops build their input views on
      # each call, and the process then collects on its own sooner).
      Application.put_env(:nx_vulkan, :compiler_fusion, false)
      on_exit(fn -> Application.delete_env(:nx_vulkan, :compiler_fusion) end)
      w0 = uniform(5, {256, 256})
      b0 = Nx.broadcast(Nx.tensor(0.0, backend: @vk), {256})
      x = uniform(6, {8, 256})
      y = Nx.as_type(Nx.equal(Nx.iota({8, 256}, axis: 1), Nx.iota({8, 1})), :f32)
      live = fn -> Nx.Vulkan.synchronize() && Nx.Vulkan.stats().pool_live_buffers end

      run = fn steps ->
        Enum.reduce(1..steps, {w0, b0}, fn _, {w, b} ->
          {w, b, _} = step(w, b, x, y)
          {w, b}
        end)
      end

      previous = Application.get_env(:nx_vulkan, :compiler_gc_bytes)
      # A heap (32 MiB) that the runs below do not fill: the process
      # collects only when :compiler_gc_bytes makes it (with the default
      # heap, when it would collect on its own depends on every term a
      # replay makes).
      min_heap = Process.flag(:min_heap_size, 4_000_000)

      try do
        # Each step returns 264 KiB: without collections the dropped
        # parameters of 40 steps stay alive; with a 1 MiB limit at most 4.
        Application.put_env(:nx_vulkan, :compiler_gc_bytes, :infinity)
        _ = run.(2)
        :erlang.garbage_collect()
        l0 = live.()
        kept = run.(40)
        grown = live.() - l0
        assert grown > 60, "expected dropped results to stay alive, #{grown} buffers"
        _ = kept

        Application.put_env(:nx_vulkan, :compiler_gc_bytes, 1024 * 1024)
        :erlang.garbage_collect()
        l0 = live.()
        kept = run.(40)
        grown = live.() - l0
        assert grown < 30, "#{grown} buffers still alive"
        _ = kept
      after
        Process.flag(:min_heap_size, min_heap)

        if previous,
          do: Application.put_env(:nx_vulkan, :compiler_gc_bytes, previous),
          else: Application.delete_env(:nx_vulkan, :compiler_gc_bytes)
      end
    end

    test "replays make no more device ops than the evaluation, and constants only once" do
      x = uniform(3, {3})
      _ = with_constants(x)
      Nx.Vulkan.synchronize()
      s0 = Nx.Vulkan.stats()
      {a, c, same} = with_constants(x)
      s1 = Nx.Vulkan.stats()
      # x * 2, + iota, - 0.5: the iota {2, 2} + 1 was computed once.
      assert s1.ops_enqueued - s0.ops_enqueued <= 3

      assert Nx.to_flat_list(a) ==
               Nx.to_flat_list(Nx.subtract(Nx.add(Nx.multiply(x, 2), Nx.iota({3})), 0.5))

      assert Nx.to_flat_list(c) == [1, 2, 3, 4]
      assert same.data.ref == x.data.ref
    end

    test "results deallocated by the caller do not affect later replays" do
      x = uniform(4, {3})

      for _ <- 1..3 do
        {a, c, _} = with_constants(x)
        assert Nx.to_flat_list(c) == [1, 2, 3, 4]
        expected = Nx.to_flat_list(evaluator(&with_constants/1, [x]) |> elem(0))
        assert Nx.to_flat_list(a) == expected
        Nx.backend_deallocate(a)
        Nx.backend_deallocate(c)
      end
    end

    test "copies into fresh buffers (concatenate, put_slice) are replayed into new buffers" do
      a = uniform(5, {2})
      b = uniform(6, {3})
      first = glue(a, b)
      second = glue(a, b)
      refute first.data.ref == second.data.ref
      expected = evaluator(&glue/2, [a, b])
      assert Nx.to_binary(first) == Nx.to_binary(expected)
      assert Nx.to_binary(second) == Nx.to_binary(expected)
      a2 = uniform(7, {2})
      assert Nx.to_binary(glue(a2, b)) == Nx.to_binary(evaluator(&glue/2, [a2, b]))
    end

    test "integer elementwise chains fuse: replays equal the Evaluator bit for bit, in fewer ops" do
      for type <- [:s32, :s64, :u32, :u64] do
        {x, _} = Nx.Random.randint(Nx.Random.key(21), 0, 1_000_000_000, shape: {5, 7}, type: type)
        {y, _} = Nx.Random.randint(Nx.Random.key(22), 0, 1_000_000, shape: {7}, type: type)
        {x, y} = {Nx.backend_copy(x, @vk), Nx.backend_copy(y, @vk)}
        expected = evaluator(&int_chain/2, [x, y])
        {_, evaluated} = ops_of(fn -> evaluator(&int_chain/2, [x, y]) end)
        _ = int_chain(x, y)
        {got, replayed} = ops_of(fn -> int_chain(x, y) end)
        assert bits(got) == bits(expected), "#{type}"
        assert replayed * 3 <= evaluated, "#{type}: #{replayed} ops of #{evaluated}"
      end
    end

    test "numbers as literals: replays equal the Evaluator bit for bit, the numbers no inputs" do
      for type <- [:f32, :f64, :f16, :bf16] do
        x = Nx.as_type(uniform(23, {4, 9}), type)
        x = Nx.put_slice(x, [0, 0], Nx.tensor([[-0.0, 0.0]], type: type, backend: @vk))
        Compiler.clear_cache()
        expected = evaluator(&literal_chain/1, [x])
        _ = literal_chain(x)
        got = literal_chain(x)
        assert bits(got) == bits(expected), "#{type}"

        # Of the numbers, only 0.1 (no f16 holds it) can be an input of a
        # fused program; the others are literals of its words.
        [{ops, _, _, _}] = for {{Compiler, :plan, _, _}, plan} <- :persistent_term.get(), do: plan

        fused =
          for {name, [_, _, {:c, words} | rest], _, _} <- ops,
              name in [:fused, :fused_pair],
              {:l, ins} = if(name == :fused, do: hd(rest), else: Enum.at(rest, 1)),
              do: {words, ins}

        assert fused != []
        words = Enum.flat_map(fused, &elem(&1, 0))
        assert Enum.count(words, &(Bitwise.band(&1, 0x100) != 0)) >= 5, "#{type}"
        numbers = for {_, ins} <- fused, {:c, bytes} <- ins, uniq: true, do: bytes
        literals = for v <- [2.0, 0.5, 3.0, 0.25, 1.5, -2.0], do: Nx.tensor(v, type: type)
        assert length(numbers) <= 1, "#{type}: #{inspect(numbers)}"
        assert Enum.all?(literals, &(Nx.to_binary(&1) not in numbers)), "#{type}"
      end
    end

    test "fusion checks a group's program only where a kept op reads it, and plans again after a rejection" do
      # s1 = (p0 + p1) * p0 is read by two ops, each of which recomputes it
      # in its own program, so its group is not checked at first; the
      # programs of s2 = s1 - p2 and s3 = -s1 pair. p2's info says 1
      # element, too few for the shape, so scratch runs fail where p2 is
      # read: first the pair's, then s2's program alone. s2's op then
      # reads s1, whose group is planned and pairs with s3's program.
      shape = {:l, [{:c, 8}]}
      dense = fn spec -> [spec, {:c, 0}, {:c, nil}] end

      ops = [
        {:binary, [{:c, :add}, shape] ++ dense.({:p, 0}) ++ dense.({:p, 1}), [0]},
        {:binary, [{:c, :multiply}, shape] ++ dense.({:s, 0}) ++ dense.({:p, 0}), [1]},
        {:binary, [{:c, :subtract}, shape] ++ dense.({:s, 1}) ++ dense.({:p, 2}), [2]},
        {:unary, [{:c, :negate}, shape] ++ dense.({:s, 1}), [3]}
      ]

      info = fn
        {:p, 2} -> {:f32, 1}
        _ -> {:f32, 8}
      end

      # Chosen by what the device supports: p2's size is not looked at.
      assert [
               {:fused, [_, _, {:c, [_, _, _]}, {:l, [_, _, _]}], [2]},
               {:fused, [_, _, {:c, [_, _, _]}, {:l, [_, _]}], [3]}
             ] = Nx.Vulkan.Fusion.fuse(ops, [{:s, 2}, {:s, 3}], info, nil)

      assert [
               {:fused_pair, [_, _, {:c, [_, _, _]}, {:c, 3}, {:l, [_, _]} | _], [3, 1]},
               {:binary, [{:c, :subtract} | _], [2]}
             ] = Nx.Vulkan.Fusion.plan(ops, [{:s, 2}, {:s, 3}], info, nil)

      # With every input of its real size the first pair stands.
      assert [{:fused_pair, [_, _, {:c, [_, _, _, _]}, _, {:l, [_, _, _]} | _], _}] =
               Nx.Vulkan.Fusion.plan(ops, [{:s, 2}, {:s, 3}], fn _ -> {:f32, 8} end, nil)
    end

    test "scalar groups of cheap ops fuse into the programs that broadcast them" do
      x = uniform(25, {5, 7})
      s = uniform(26, {})

      for {fun, ops} <- [{&scalar_cheap/2, 1}, {&scalar_costly/2, 2}] do
        expected = evaluator(fun, [x, s])
        _ = fun.(x, s)
        {got, replayed} = ops_of(fn -> fun.(x, s) end)
        assert bits(got) == bits(expected)
        # s * 2 + 1 is computed at every element of x's program; exp(s)
        # is an op of its own.
        assert replayed == ops
      end
    end

    test "programs write their blocks of concatenations and stacks in place" do
      # The plan's ops by name, and the blocks its programs write in place
      # (a fused_into op's one, a fused_pair op's destinations).
      plan_ops = fn ->
        [{ops, _, _, _}] = for {{Compiler, :plan, _, _}, plan} <- :persistent_term.get(), do: plan

        in_place =
          Enum.map(ops, fn
            {:fused_into, _, _, _} ->
              1

            {:fused_pair, specs, _, _} ->
              specs |> Enum.drop(5) |> Enum.count(&match?({:s, _}, &1))

            _ ->
              0
          end)

        {Enum.frequencies_by(ops, &elem(&1, 0)), Enum.sum(in_place)}
      end

      for type <- [:f32, :f16, :s32, :u64] do
        x = Nx.as_type(Nx.multiply(uniform(27, {6, 5}), 100), type)
        y = Nx.as_type(Nx.multiply(uniform(28, {6, 5}), 100), type)

        for {fun, into, copies} <- [
              {&blocks/2, 2, 1},
              {&stacked/2, 2, 0},
              {&side_by_side/2, 0, 2},
              {&shared_block/2, 1, 1}
            ] do
          Compiler.clear_cache()
          expected = evaluator(fun, [x, y])
          first = fun.(x, y)
          assert bits(first) == bits(expected), "#{type} #{inspect(fun)} first call"
          second = fun.(x, y)
          third = fun.(x, y)
          # Each replay writes a destination of its own.
          assert bits(second) == bits(expected), "#{type} #{inspect(fun)} replay"
          assert bits(third) == bits(expected), "#{type} #{inspect(fun)} replay"
          {counts, in_place} = plan_ops.()

          assert in_place == into and Map.get(counts, :copy_into, 0) == copies,
                 "#{type} #{inspect(fun)}: #{inspect(counts)}"
        end
      end
    end

    test "concatenations of constants are constants of the plan" do
      x = uniform(29, {5})

      for {fun, ops} <- [{&const_blocks/1, 1}, {&const_output/1, 1}] do
        Compiler.clear_cache()
        expected = evaluator(fun, [x])
        {_, evaluated} = ops_of(fn -> evaluator(fun, [x]) end)
        first = fun.(x)
        assert bits(first) == bits(expected)

        for _ <- 1..2 do
          {got, replayed} = ops_of(fn -> fun.(x) end)
          assert bits(got) == bits(expected)
          # The assembly (an empty, its copies, the reverse or product of
          # constants) is done once: only the op reading x is replayed.
          assert replayed == ops, "#{inspect(fun)}: #{replayed} ops of #{evaluated}"
        end

        # Results the caller deallocates leave later replays intact.
        [fun.(x)] |> Nx.Defn.Composite.flatten_list() |> Enum.each(&Nx.backend_deallocate/1)
        assert bits(fun.(x)) == bits(expected)
      end
    end

    test "a program writes its block in place only where no write between meets it" do
      dense = [{:c, 0}, {:c, nil}]
      neg = Bitwise.bsl(1, 2)

      program =
        {:fused, [{:c, :f32}, {:c, [4]}, {:c, [neg]}, {:l, [{:t, [{:p, 1} | dense]}]}], [1]}

      ops = fn other_offset ->
        [
          {:empty, [{:c, :dev}, {:c, :f32}, {:c, 8}], [0]},
          program,
          {:copy_into, [{:s, 0}, {:c, other_offset}, {:c, [1]}, {:c, [4]}, {:p, 0}] ++ dense, []},
          {:copy_into, [{:s, 0}, {:c, 0}, {:c, [1]}, {:c, [4]}, {:s, 1}] ++ dense, []}
        ]
      end

      # The other copy writes elements 4..7: the program writes 0..3 itself.
      assert [
               {:empty, _, [0]},
               {:fused_into, [{:s, 0}, {:c, 0}, {:c, :f32} | _], []},
               {:copy_into, [{:s, 0}, {:c, 4} | _], []}
             ] = Nx.Vulkan.Fusion.into_destinations(ops.(4), [{:s, 0}])

      # It writes 2..5, which the block's copy overwrites after it: kept.
      assert Nx.Vulkan.Fusion.into_destinations(ops.(2), [{:s, 0}]) == ops.(2)
    end

    test "a one-element slice read as a number runs in the program that reads it" do
      for type <- [:f32, :f16, :s32, :u64] do
        x = Nx.as_type(Nx.multiply(uniform(43, {6, 5}), 100), type)
        y = Nx.as_type(Nx.tensor(7), type)
        Compiler.clear_cache()
        expected = evaluator(&one_element/2, [x, y])
        {_, evaluated} = ops_of(fn -> evaluator(&one_element/2, [x, y]) end)
        assert bits(one_element(x, y)) == bits(expected), "#{type} first call"
        {got, replayed} = ops_of(fn -> one_element(x, y) end)
        assert bits(got) == bits(expected), "#{type} replay"
        # The slice's copy and the arithmetic: one program.
        assert replayed == 1, "#{type}: #{replayed} ops of #{evaluated}"
      end
    end

    test "a program reading a concatenation runs in the programs that write its blocks" do
      plan_ops = fn ->
        [{ops, _, _, _}] = for {{Compiler, :plan, _, _}, plan} <- :persistent_term.get(), do: plan
        Enum.frequencies_by(ops, &elem(&1, 0))
      end

      for type <- [:f32, :f16, :s32, :u64] do
        x = Nx.as_type(Nx.multiply(uniform(41, {6, 5}), 100), type)
        y = Nx.as_type(Nx.multiply(uniform(42, {6, 5}), 100), type)
        s = Nx.as_type(Nx.tensor(3), type)

        for {fun, args, folded?} <- [
              {&read_blocks/3, [x, y, s], true},
              {&read_stack/2, [x, y], true},
              {&read_output/2, [x, y], false}
            ] do
          Compiler.clear_cache()
          expected = evaluator(fun, args)
          {_, evaluated} = ops_of(fn -> evaluator(fun, args) end)
          assert bits(apply(fun, args)) == bits(expected), "#{type} #{inspect(fun)} first call"

          for _ <- 1..2 do
            {got, replayed} = ops_of(fn -> apply(fun, args) end)
            assert bits(got) == bits(expected), "#{type} #{inspect(fun)} replay"

            assert if(folded?, do: replayed < evaluated, else: replayed <= evaluated),
                   "#{type} #{inspect(fun)}: #{replayed} of #{evaluated}"
          end

          counts = plan_ops.()
          # Folded: no program of its own reads the blocks' tensor, and
          # the blocks are still written in place (no copy).
          assert Map.has_key?(counts, :fused) != folded?,
                 "#{type} #{inspect(fun)}: #{inspect(counts)}"

          assert Map.get(counts, :copy_into, 0) == 0,
                 "#{type} #{inspect(fun)}: #{inspect(counts)}"
        end
      end
    end

    test "a reader folds into its blocks' programs only where every element reads the same" do
      dense = [{:c, 0}, {:c, nil}]
      neg = Bitwise.bsl(1, 2)
      # r2 = r0 * r1 (multiply: class 1, op 2).
      mul = Bitwise.bor(1, Bitwise.bsl(2, 2)) |> Bitwise.bor(Bitwise.bsl(1, 16))
      imm = <<2.0::float-32-native>>
      bcast = {:t, [{:p, 2}, {:c, 0}, {:c, [0]}]}

      writer = fn off, p ->
        {:fused_into,
         [
           {:s, 0},
           {:c, off},
           {:c, :f32},
           {:c, [2, 2]},
           {:c, [neg]},
           {:l, [{:t, [{:p, p} | dense]}]}
         ], []}
      end

      reader = fn second ->
        {:fused, [{:c, :f32}, {:c, [8]}, {:c, [mul]}, {:l, [{:t, [{:s, 0} | dense]}, second]}],
         [1]}
      end

      ops = fn second ->
        [
          {:empty, [{:c, :dev}, {:c, :f32}, {:c, 8}], [0]},
          writer.(0, 0),
          writer.(4, 1),
          reader.(second)
        ]
      end

      # Each block's program: r1 = -r0, then r1 times the immediate (r2),
      # or the broadcast read again over the block's shape.
      folded_mul =
        Bitwise.bor(1, Bitwise.bsl(2, 2))
        |> Bitwise.bor(Bitwise.bsl(2, 9))
        |> Bitwise.bor(Bitwise.bsl(1, 16))

      for {second, read} <- [
            {{:c, imm}, {:c, imm}},
            {bcast, {:t, [{:p, 2}, {:c, 0}, {:c, [0, 0]}]}}
          ] do
        assert [
                 {:empty, [_, {:c, :f32}, {:c, 8}], [1]},
                 {:fused_into,
                  [
                    {:s, 1},
                    {:c, 0},
                    {:c, :f32},
                    {:c, [2, 2]},
                    {:c, [^neg, ^folded_mul]},
                    {:l, [{:t, [{:p, 0} | _]}, ^read]}
                  ], []},
                 {:fused_into,
                  [
                    {:s, 1},
                    {:c, 4},
                    {:c, :f32},
                    {:c, [2, 2]},
                    {:c, [^neg, ^folded_mul]},
                    {:l, [{:t, [{:p, 1} | _]}, ^read]}
                  ], []}
               ] = Nx.Vulkan.Fusion.fold_readers(ops.(second), [{:s, 1}], nil)
      end

      # A program's key plan/5 rejected is not made again.
      [_, {:fused_into, [_, _, {:c, t}, {:c, sh}, {:c, w}, {:l, ins}], _} | _] =
        Nx.Vulkan.Fusion.fold_readers(ops.({:c, imm}), [{:s, 1}], nil)

      rejected = MapSet.new([{:single, t, sh, w, ins}])

      assert Nx.Vulkan.Fusion.fold_readers(ops.({:c, imm}), [{:s, 1}], nil, rejected) ==
               ops.({:c, imm})

      unchanged = [
        # The concatenation is an output too.
        {ops.({:c, imm}), [{:s, 1}, {:s, 0}]},
        # The reader's other input is read element for element.
        {ops.({:t, [{:p, 2} | dense]}), [{:s, 1}]},
        # A block is copied, not written by a program.
        {List.replace_at(
           ops.({:c, imm}),
           2,
           {:copy_into, [{:s, 0}, {:c, 4}, {:c, [1]}, {:c, [4]}, {:p, 1}] ++ dense, []}
         ), [{:s, 1}]},
        # The blocks leave elements 4..7 unwritten.
        {List.delete_at(ops.({:c, imm}), 2), [{:s, 1}]},
        # The reader reads the concatenation's second half only.
        {List.replace_at(
           ops.({:c, imm}),
           3,
           {:fused,
            [
              {:c, :f32},
              {:c, [4]},
              {:c, [mul]},
              {:l, [{:t, [{:s, 0}, {:c, 4}, {:c, nil}]}, {:c, imm}]}
            ], [1]}
         ), [{:s, 1}]},
        # The broadcast slot is made after the first block's program.
        {List.insert_at(
           ops.({:t, [{:s, 5}, {:c, 0}, {:c, [0]}]}),
           2,
           {:unary, [{:c, :abs}, {:c, [1]}, {:p, 2}] ++ dense, [5]}
         ), [{:s, 1}]}
      ]

      for {plan, outs} <- unchanged do
        assert Nx.Vulkan.Fusion.fold_readers(plan, outs, nil) == plan
      end
    end

    test "programs pair only where one computes the same at the other's place" do
      dense = [{:c, 0}, {:c, nil}]
      input = fn spec -> {:t, [spec | dense]} end
      neg = Bitwise.bsl(1, 2)
      # r1 = -x, r2 = r1 * y: the second program's first word is the first's.
      mul =
        Bitwise.bor(1, Bitwise.bsl(2, 2))
        |> Bitwise.bor(Bitwise.bsl(2, 9))
        |> Bitwise.bor(Bitwise.bsl(1, 16))

      first = {:fused, [{:c, :f32}, {:c, [4]}, {:c, [neg]}, {:l, [input.({:p, 0})]}], [1]}

      second = fn y ->
        {:fused, [{:c, :f32}, {:c, [4]}, {:c, [neg, mul]}, {:l, [input.({:p, 0}), input.(y)]}],
         [3]}
      end

      # Both read parameters: one program, -x its second result.
      assert [
               {:fused_pair,
                [
                  {:c, :f32},
                  {:c, [4]},
                  {:c, [^neg, ^mul]},
                  {:c, 2},
                  {:l, [_, _]},
                  {:c, nil},
                  {:c, 0},
                  {:c, nil},
                  {:c, 0}
                ], [3, 1]},
               {:unary, _, [2]}
             ] =
               Nx.Vulkan.Fusion.pair_programs(
                 [
                   first,
                   {:unary, [{:c, :abs}, {:c, [4]}, {:p, 1}] ++ dense, [2]},
                   second.({:p, 1})
                 ],
                 nil
               )

      # A chain: the second reads the first's result densely, which the
      # pair computes in a register (a product over p0's negation and p1),
      # or through a view, which it does not.
      prod = Bitwise.bor(1, Bitwise.bsl(2, 2)) |> Bitwise.bor(Bitwise.bsl(1, 16))

      chained = fn read ->
        {:fused, [{:c, :f32}, {:c, [4]}, {:c, [prod]}, {:l, [read, input.({:p, 1})]}], [3]}
      end

      assert [
               {:fused_pair,
                [_, _, {:c, [^neg, ^mul]}, {:c, 2}, {:l, [_, _]}, {:c, nil}, _, {:c, nil}, _],
                [3, 1]}
             ] = Nx.Vulkan.Fusion.pair_programs([first, chained.(input.({:s, 1}))], nil)

      ops = [first, chained.({:t, [{:s, 1}, {:c, 0}, {:c, [0]}]})]
      assert Nx.Vulkan.Fusion.pair_programs(ops, nil) == ops

      # The second reads a slot made between them: left as it is.
      # The second reads a slot made between them: the pair takes the
      # second's place, where the first computes the same.
      abs_p1 = {:unary, [{:c, :abs}, {:c, [4]}, {:p, 1}] ++ dense, [2]}

      assert [^abs_p1, {:fused_pair, [_, _, {:c, [^neg, ^mul]}, {:c, 2} | _], [3, 1]}] =
               Nx.Vulkan.Fusion.pair_programs([first, abs_p1, second.({:s, 2})], nil)

      # ... or one that an op between writes into.
      copy = {:copy_into, [{:s, 2}, {:c, 0}, {:c, [1]}, {:c, [4]}, {:p, 1}] ++ dense, []}
      empty = {:empty, [{:c, :dev}, {:c, :f32}, {:c, 4}], [2]}

      assert [^empty, ^copy, {:fused_pair, [_, _, {:c, [^neg, ^mul]}, {:c, 2} | _], [3, 1]}] =
               Nx.Vulkan.Fusion.pair_programs([empty, first, copy, second.({:s, 2})], nil)

      # Neither place: an op between reads the first's result, and the
      # second reads a slot made between them.
      abs_r1 = {:unary, [{:c, :abs}, {:c, [4]}, {:s, 1}] ++ dense, [2]}
      ops = [first, abs_r1, second.({:s, 2})]
      assert Nx.Vulkan.Fusion.pair_programs(ops, nil) == ops

      # ... or an op between writes a slot the first reads.
      ops = [
        {:empty, [{:c, :dev}, {:c, :f32}, {:c, 4}], [4]},
        {:fused, [{:c, :f32}, {:c, [4]}, {:c, [neg]}, {:l, [input.({:s, 4})]}], [1]},
        {:copy_into, [{:s, 4}, {:c, 0}, {:c, [1]}, {:c, [4]}, {:p, 1}] ++ dense, []},
        abs_p1,
        second.({:s, 2})
      ]

      assert Nx.Vulkan.Fusion.pair_programs(ops, nil) == ops

      # Blocks of one destination: paired where the writes between meet
      # neither block, not where one meets the later program's.
      into = fn off, words, inputs ->
        {:fused_into, [{:s, 0}, {:c, off}, {:c, :f32}, {:c, [4]}, {:c, words}, {:l, inputs}], []}
      end

      blocks = fn other ->
        [
          {:empty, [{:c, :dev}, {:c, :f32}, {:c, 12}], [0]},
          into.(0, [neg], [input.({:p, 0})]),
          {:copy_into, [{:s, 0}, {:c, other}, {:c, [1]}, {:c, [4]}, {:p, 1}] ++ dense, []},
          into.(4, [neg, mul], [input.({:p, 0}), input.({:p, 1})])
        ]
      end

      assert [
               {:empty, _, [0]},
               {:fused_pair, [_, _, _, {:c, 2}, _, {:s, 0}, {:c, 4}, {:s, 0}, {:c, 0}], []},
               {:copy_into, [{:s, 0}, {:c, 8} | _], []}
             ] = Nx.Vulkan.Fusion.pair_programs(blocks.(8), nil)

      assert Nx.Vulkan.Fusion.pair_programs(blocks.(6), nil) == blocks.(6)

      # The later program reads the earlier one's destination (the block
      # it writes among others): no pair.
      ops = [
        {:empty, [{:c, :dev}, {:c, :f32}, {:c, 4}], [0]},
        into.(0, [neg], [input.({:p, 0})]),
        {:fused,
         [{:c, :f32}, {:c, [4]}, {:c, [neg, mul]}, {:l, [input.({:p, 0}), input.({:s, 0})]}], [5]}
      ]

      assert Nx.Vulkan.Fusion.pair_programs(ops, nil) == ops
    end

    test "constant folding leaves what the plan writes into or deallocates a slot" do
      [r0, r1, r2, r3, c] = for _ <- 1..5, do: make_ref()
      prov = %{r0 => {:s, 0}, r1 => {:s, 1}, r2 => {:s, 2}, r3 => {:s, 3}}
      dense = [{:c, 0}, {:c, nil}]

      ops = [
        # s0 = copy of a constant, later deallocated: stays an op.
        {:unary, [{:c, :copy}, {:c, [4]}, {:c, c}] ++ dense, [0]},
        # s1 = empty, its one block a constant: a constant, s2 = -s1 too.
        {:empty, [{:c, :dev}, {:c, :f32}, {:c, 4}], [1]},
        {:copy_into, [{:s, 1}, {:c, 0}, {:c, [1]}, {:c, [4]}, {:c, c}] ++ dense, []},
        {:unary, [{:c, :negate}, {:c, [4]}, {:s, 1}] ++ dense, [2]},
        # s3 = s0 + s2 + p0 stays, reading s2 as the constant.
        {:binary, [{:c, :add}, {:c, [4]}, {:s, 0}] ++ dense ++ [{:p, 0}] ++ dense, [3]},
        {:deallocate, [{:s, 0}], []}
      ]

      {kept, prov} = Compiler.__fold_constants__(ops, prov)

      assert [
               {:unary, [{:c, :copy} | _], [0]},
               {:binary, [{:c, :add}, _, {:s, 0} | _], [3]},
               {:deallocate, [{:s, 0}], []}
             ] = kept

      assert prov[r1] == {:c, r1} and prov[r2] == {:c, r2}
      assert prov[r0] == {:s, 0} and prov[r3] == {:s, 3}

      # An empty read before its last copy, or deallocated, stays.
      for extra <- [
            {:unary, [{:c, :copy}, {:c, [4]}, {:s, 1}] ++ dense, [4]},
            {:deallocate, [{:s, 1}], []}
          ] do
        ops = [
          {:empty, [{:c, :dev}, {:c, :f32}, {:c, 8}], [1]},
          {:copy_into, [{:s, 1}, {:c, 0}, {:c, [1]}, {:c, [4]}, {:c, c}] ++ dense, []},
          extra,
          {:copy_into, [{:s, 1}, {:c, 4}, {:c, [1]}, {:c, [4]}, {:c, c}] ++ dense, []}
        ]

        {kept, _} = Compiler.__fold_constants__(ops, %{r1 => {:s, 1}, r0 => {:s, 4}})
        assert length(kept) == 4
      end
    end

    test "threefry's rounds fuse into a few programs, their rotation amounts literals" do
      key = Nx.backend_copy(Nx.Random.key(31), @vk)
      expected = evaluator(&random_bits/1, [key])
      {_, evaluated} = ops_of(fn -> evaluator(&random_bits/1, [key]) end)
      _ = random_bits(key)
      {got, replayed} = ops_of(fn -> random_bits(key) end)
      assert bits(got) == bits(expected)
      assert replayed <= 25, "#{replayed} ops of #{evaluated}"
    end

    test "loops and branches on counters are replayed; on device data they are evaluated" do
      # Counters and their conditions stay on the host: the evaluation is
      # captured, and replays (which fuse the loop's elementwise ops into
      # fewer device ops) equal the Evaluator's results bit for bit.
      q = uniform(15, {6})
      key = Nx.backend_copy(Nx.Random.key(5), @vk)

      Enum.reduce(1..3, {q, key}, fn call, {q, key} ->
        expected = evaluator(&counter_loops/2, [q, key])
        {_, evaluated} = ops_of(fn -> evaluator(&counter_loops/2, [q, key]) end)
        {got, ops} = ops_of(fn -> counter_loops(q, key) end)
        assert bits(got) == bits(expected), "call #{call}"
        if call > 1, do: assert(ops < evaluated, "call #{call}: #{ops} ops of #{evaluated}")
        {q2, _u, key2} = got
        {q2, key2}
      end)

      x = uniform(8, {4})
      {_, evaluated} = ops_of(fn -> evaluator(&counted_loop/1, [x]) end)

      for _ <- 1..3 do
        assert Nx.to_binary(counted_loop(x)) == Nx.to_binary(Nx.multiply(x, 8))
      end

      {_, replayed} = ops_of(fn -> counted_loop(x) end)
      assert replayed < evaluated

      # A condition on device data downloads it: such a function is
      # evaluated on every call, each input taking its own iterations.
      small = Nx.multiply(Nx.abs(x), 0.01)
      big = Nx.add(Nx.abs(x), 30.0)

      for _ <- 1..3, input <- [small, big] do
        assert Nx.to_binary(doubling(input)) == Nx.to_binary(evaluator(&doubling/1, [input]))
      end

      # A loop whose capture would keep more than 256 MiB of results alive
      # gives up its capture: evaluated on every call, one add per
      # iteration (a replay would fuse them).
      ones = Nx.broadcast(Nx.tensor(1.0, backend: @vk), {2_100_000}) |> Nx.add(0.0)

      for _ <- 1..2 do
        {got, ops} = ops_of(fn -> add_ones(ones) end)
        assert ops == 40
        assert Nx.to_flat_list(got[0..2]) == [41.0, 41.0, 41.0]
      end

      neg = Nx.negate(x)

      for _ <- 1..3 do
        assert Nx.to_binary(branch(x)) == Nx.to_binary(evaluator(&branch/1, [x]))
        assert Nx.to_binary(branch(neg)) == Nx.to_binary(evaluator(&branch/1, [neg]))
      end

      parent = self()
      hooked = Nx.Defn.jit(&hooked/1, hooks: %{seen: &send(parent, {:seen, Nx.to_flat_list(&1)})})

      for _ <- 1..3 do
        out = hooked.(x)
        assert_received {:seen, seen}
        assert seen == Nx.to_flat_list(Nx.multiply(x, 3))
        assert Nx.to_flat_list(out) == Nx.to_flat_list(Nx.add(Nx.multiply(x, 3), 1))
      end
    end

    test "the same tensor twice, host tensors and new shapes give correct results" do
      a = uniform(9, {5})
      b = uniform(10, {5})

      for _ <- 1..2 do
        assert Nx.to_binary(two(a, a)) == Nx.to_binary(evaluator(&two/2, [a, a]))
        assert Nx.to_binary(two(a, b)) == Nx.to_binary(evaluator(&two/2, [a, b]))
        assert Nx.to_binary(two(b, a)) == Nx.to_binary(evaluator(&two/2, [b, a]))
      end

      host = Nx.backend_copy(a, Nx.BinaryBackend)
      assert Nx.to_binary(two(host, b)) == Nx.to_binary(evaluator(&two/2, [a, b]))

      c = uniform(11, {2, 7})
      assert Nx.to_binary(two(c, c)) == Nx.to_binary(evaluator(&two/2, [c, c]))
      assert_raise ArgumentError, fn -> two(uniform(12, {3}), uniform(13, {4})) end
    end

    test "constant arguments without a buffer are planned, replayed and returned" do
      x = uniform(14, {2, 3})
      twice = Nx.Defn.jit(&with_constants/1)

      # Planned: the replay fuses the two elementwise trees into one
      # program of two results, or, with only constants (the plan is keyed
      # on their values), computes them once when planning.
      for {a, b, want_ops} <- [
            {Nx.tensor(2.0), Nx.tensor(3.0), 0},
            {x, Nx.tensor(0.5), 1},
            {Nx.tensor(-1.5), x, 1}
          ] do
        expected = evaluator(&shared_product/2, [a, b])
        assert bits(shared_product(a, b)) == bits(expected)
        {got, replayed} = ops_of(fn -> shared_product(a, b) end)
        assert bits(got) == bits(expected)
        assert replayed == want_ops, "#{inspect({a.shape, b.shape})}: #{replayed} ops"
      end

      # a one-element upload of the same value as a constant without a
      # buffer: each gets its own plan (the upload's is read from its buffer)
      upload = Nx.from_binary(<<0.25::float-32-native>>, :f32) |> Nx.reshape({})
      lazy = Nx.tensor(0.25)

      for b <- [upload, lazy, upload, lazy] do
        assert bits(shared_product(x, b)) == bits(evaluator(&shared_product/2, [x, b]))
      end

      # a constant argument returned as is stays without a buffer
      c = Nx.tensor(4.0)

      for _ <- 1..2 do
        {_, _, same} = twice.(c)
        assert same.data.ref == nil and Nx.to_number(same) == 4.0
      end
    end

    test "host fallbacks are evaluated and counted on every call" do
      x = Nx.backend_copy(Nx.tensor([[2.0, 1.0], [1.0, 3.0]]), @vk)
      det = &custom_reduce/1
      Nx.Vulkan.reset_fallbacks()
      first = det.(x)
      n1 = Nx.Vulkan.fallbacks() |> Map.values() |> Enum.sum()
      assert n1 > 0
      second = det.(x)
      assert Nx.Vulkan.fallbacks() |> Map.values() |> Enum.sum() == 2 * n1
      expected = Nx.to_number(evaluator(&custom_reduce/1, [x]))
      assert Nx.to_number(first) == expected
      assert Nx.to_number(second) == expected
    end

    test "concurrent callers get their own results" do
      w = uniform(14, {6, 3})
      fun = fn x, w -> Nx.dot(x, w) |> Nx.exp() |> Nx.sum(axes: [1]) end
      f = Nx.Defn.jit(fun)

      inputs = for i <- 1..16, do: uniform(100 + i, {4, 6})

      expected =
        Enum.map(
          inputs,
          &Nx.to_binary(evaluator(fun, [&1, w]))
        )

      got =
        inputs
        |> Task.async_stream(fn x -> for(_ <- 1..20, do: Nx.to_binary(f.(x, w))) end,
          max_concurrency: 16
        )
        |> Enum.map(fn {:ok, list} -> list end)

      for {runs, want} <- Enum.zip(got, expected), r <- runs, do: assert(r == want)
    end

    test "clear_cache empties the cache and later calls compile again" do
      x = uniform(15, {3})
      _ = two(x, x)
      assert Compiler.cache_size() > 0
      assert Compiler.clear_cache() == :ok
      assert Compiler.cache_size() == 0
      assert Nx.to_binary(two(x, x)) == Nx.to_binary(evaluator(&two/2, [x, x]))
    end
  end
end
