# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.ReliabilityNxTest do
    # Out of memory and device loss seen from Nx: the exceptions a user
    # gets, and recovery with Nx.Vulkan.reopen/2. Each test reopens the
    # default device with its own options and restores it afterwards.
    use ExUnit.Case, async: false
    @moduletag :nx

    import Bitwise

    setup do
      on_exit(fn -> Nx.Vulkan.reopen() end)
      :ok
    end

    defp mib(n), do: Nx.broadcast(Nx.tensor(1.5, type: :f32), {n <<< 18})

    test "an Nx op past the pool limit raises OutOfMemoryError; later ops succeed" do
      Nx.Vulkan.reopen(nil, %{pool_limit_bytes: 48 <<< 20})
      Nx.default_backend(Nx.Vulkan.Backend)
      held = for _ <- 1..10, do: Nx.add(mib(4), 1)

      error =
        assert_raise Nx.Vulkan.OutOfMemoryError, fn ->
          for _ <- 1..4, do: Nx.add(mib(4), 1)
        end

      assert error.device == Nx.Vulkan.default_device_index()
      assert error.bytes_reserved <= 48 <<< 20
      # Nothing lost; the device keeps working once references are dropped.
      for t <- held, do: assert(Nx.to_flat_list(t[0..1]) == [2.5, 2.5])
      [first | _] = held
      assert Nx.to_number(Nx.sum(first)) == 2.5 * (4 <<< 18)
      :erlang.garbage_collect()
      assert Nx.to_number(Nx.sum(Nx.add(mib(8), 1))) == 2.5 * (8 <<< 18)
    after
      Nx.default_backend(Nx.BinaryBackend)
    end

    test "a compiled replay past the pool limit recovers dropped results, or raises losing nothing" do
      Nx.Vulkan.reopen(nil, %{pool_limit_bytes: 48 <<< 20})
      Nx.default_backend(Nx.Vulkan.Backend)
      # only the pool's recovery collects this process's dropped results: no
      # collection after replays, and a heap that does not fill up
      Application.put_env(:nx_vulkan, :compiler_gc_bytes, :infinity)
      Process.flag(:min_heap_size, 8_000_000)

      # exp's result is read twice (kept, not recomputed), so a replay
      # holds two 4 MiB tensors and returns one
      f =
        Nx.Defn.jit(
          fn x ->
            a = Nx.exp(x)
            {Nx.multiply(a, Nx.sin(x)), Nx.sum(a)}
          end,
          compiler: Nx.Vulkan.Compiler
        )

      x = Nx.iota({1 <<< 20}, type: :f32) |> Nx.divide(1 <<< 20)
      {r0, s0} = Nx.Defn.jit(&{Nx.multiply(Nx.exp(&1), Nx.sin(&1)), Nx.sum(Nx.exp(&1))}).(x)
      expected = {Nx.to_binary(r0), Nx.to_number(s0)}
      ctx = Nx.Vulkan.device()
      trims = Nx.Vulkan.NIF.device_stats(ctx).pool_trims

      # 30 replays drop 120 MiB of results: replays fail for memory, collect
      # and start again
      last =
        Enum.reduce(1..30, nil, fn _, _ ->
          {r, s} = f.(x)
          assert Nx.to_number(s) == elem(expected, 1)
          r
        end)

      assert Nx.to_binary(last) == elem(expected, 0)
      assert Nx.Vulkan.NIF.device_stats(ctx).pool_trims > trims

      # Results held until a replay fails: its first op (a sum) gets its
      # small buffer, the second (4 MiB) fails. The replay deallocates the
      # sum's result and raises; the results held are intact.
      g = Nx.Defn.jit(&Nx.multiply(&1, Nx.sum(&1)), compiler: Nx.Vulkan.Compiler)
      expected = Nx.to_binary(Nx.multiply(x, Nx.sum(x)))

      outcome =
        Enum.reduce_while(1..20, [], fn _, held ->
          # no garbage the recovery's collection could free
          :erlang.garbage_collect()
          Nx.Vulkan.synchronize()
          before = Nx.Vulkan.NIF.device_stats(ctx).pool_bytes_in_use

          try do
            {:cont, [g.(x) | held]}
          rescue
            Nx.Vulkan.OutOfMemoryError ->
              Nx.Vulkan.synchronize()
              assert Nx.Vulkan.NIF.device_stats(ctx).pool_bytes_in_use == before
              {:halt, {:out_of_memory, held}}
          end
        end)

      assert {:out_of_memory, [_ | _] = held} = outcome
      for r <- held, do: assert(Nx.to_binary(r) == expected)
    after
      Application.delete_env(:nx_vulkan, :compiler_gc_bytes)
      Nx.default_backend(Nx.BinaryBackend)
    end

    test "a lost device raises Nx.Vulkan.Error; reopen gives a working context" do
      Nx.Vulkan.reopen()
      t = Nx.iota({64}, type: :f32, backend: Nx.Vulkan.Backend)
      assert Nx.to_number(Nx.sum(t)) == 2016.0
      Nx.Vulkan.NIF.inject_fault(Nx.Vulkan.device(), :device_lost)

      error = assert_raise Nx.Vulkan.Error, fn -> Nx.to_binary(Nx.multiply(t, t)) end

      assert error.status == :device_lost
      assert error.message =~ "injected"
      # Later ops and downloads fail with the same cause.
      assert %Nx.Vulkan.Error{status: :device_lost} = catch_error(Nx.to_binary(t))
      assert %Nx.Vulkan.Error{status: :device_lost} = catch_error(Nx.exp(t))

      Nx.Vulkan.reopen()
      u = Nx.iota({64}, type: :f32, backend: Nx.Vulkan.Backend)
      assert Nx.to_number(Nx.sum(Nx.multiply(u, 2))) == 4032.0
      assert Nx.Vulkan.NIF.device_status(Nx.Vulkan.device()) == :ok
      # Tensors of the failed context keep raising its error.
      assert %Nx.Vulkan.Error{status: :device_lost} = catch_error(Nx.to_binary(t))
    end
  end
else
  defmodule Nx.Vulkan.ReliabilityNxTest do
    use ExUnit.Case
    @moduletag :nx

    test "reliability tests through Nx need Nx"
  end
end
