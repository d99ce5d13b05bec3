# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.DeferTest do
    # The device option defer_elementwise seen from Nx: the same bits as
    # with the option off, in fewer device ops, and the stats counting it.
    # Each test reopens the default device and restores it afterwards.
    use ExUnit.Case, async: false
    @moduletag :nx

    setup do
      on_exit(fn -> Nx.Vulkan.reopen() end)
      :ok
    end

    defp random(seed, shape, type), do: Nx.Vulkan.TestData.uniform(seed, shape, type, -2.0, 2.0)

    # An SGD-like update, a ReLU and a normalisation: basic ops, numbers as
    # operands, a broadcast row, then a reduction and an exp that read the
    # deferred results.
    defp compute(w, g, b) do
      w2 = Nx.subtract(w, Nx.multiply(g, 0.01))
      r = Nx.max(Nx.add(w2, b), 0.0)
      n = Nx.divide(Nx.negate(r), Nx.add(Nx.abs(w2), 1.5))
      {w2, n, Nx.sum(n, axes: [1]), Nx.exp(Nx.multiply(n, n))}
    end

    defp run(defer, type) do
      Nx.Vulkan.reopen(nil, %{defer_elementwise: defer})
      w = random(1, {33, 65}, type)
      g = random(2, {33, 65}, type)
      b = random(3, {65}, type)
      s0 = Nx.Vulkan.stats()
      results = compute(w, g, b) |> Tuple.to_list() |> Enum.map(&Nx.to_binary/1)
      s1 = Nx.Vulkan.stats()

      {results, s1.ops_enqueued - s0.ops_enqueued, s1.deferred_ops - s0.deferred_ops,
       s1.deferred_fused - s0.deferred_fused}
    end

    test "deferred ops give the bits of ops run one by one, in fewer device ops" do
      for type <- [:f32, :f16, :bf16] do
        {eager, eager_ops, 0, 0} = run(false, type)
        {deferred, deferred_ops, n_deferred, n_fused} = run(true, type)
        assert deferred == eager, "#{type}"
        assert n_deferred == 9, "#{type}: #{n_deferred} ops deferred"
        assert n_fused >= 2, "#{type}: #{n_fused} fused kernels"
        assert deferred_ops < eager_ops, "#{type}: #{deferred_ops} against #{eager_ops} ops"
      end
    end

    test "a deferred result dropped unread queues nothing" do
      Nx.Vulkan.reopen(nil, %{defer_elementwise: true})
      x = random(4, {128}, :f32)
      Nx.Vulkan.synchronize()
      s0 = Nx.Vulkan.stats()
      _ = x |> Nx.multiply(2.0) |> Nx.add(1.0)
      s1 = Nx.Vulkan.stats()
      assert s1.deferred_ops - s0.deferred_ops == 2
      assert s1.ops_enqueued == s0.ops_enqueued
    end
  end
end
