# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.SpirvPruneTest do
    # Pipelines from SPIR-V pruned for their specialization constants (the
    # default) against whole modules (the device option no_spirv_prune),
    # seen from Nx: the same bits for transcendental ops and for a step
    # through Nx.Vulkan.Compiler, whose fused programs are pruned too (f32
    # only: a whole fused module holds 64 instruction slots, each with
    # every op, and takes lavapipe seconds per program; the C suite's
    # spirv.pruned_kernels_match_whole_modules compares fused programs of
    # the other types). Each test reopens the default device and restores
    # it afterwards.
    use ExUnit.Case, async: false
    @moduletag :nx

    setup do
      on_exit(fn ->
        Nx.Vulkan.Compiler.clear_cache()
        Nx.Vulkan.reopen()
      end)

      :ok
    end

    defp random(seed, shape, type), do: Nx.Vulkan.TestData.uniform(seed, shape, type, -3.0, 3.0)

    defp step(x, y) do
      a = Nx.exp(x) |> Nx.add(y) |> Nx.abs() |> Nx.log()
      b = Nx.select(Nx.less(x, y), Nx.tanh(a), Nx.atan2(x, y))
      {Nx.sum(Nx.pow(Nx.abs(b), 1.5)), b}
    end

    defp run(prune, type) do
      Nx.Vulkan.reopen(nil, %{no_spirv_prune: not prune, disable_disk_cache: true})
      Nx.Vulkan.Compiler.clear_cache()
      x = random(1, {17, 33}, type)
      y = random(2, {17, 33}, type)

      eager = [
        Nx.exp(x),
        Nx.log(Nx.abs(x)),
        Nx.sin(x),
        Nx.erf(x),
        Nx.pow(Nx.abs(x), y),
        Nx.atan2(x, y)
      ]

      compiled =
        if type == :f32 do
          {s, b} = Nx.Defn.jit(&step/2, compiler: Nx.Vulkan.Compiler).(x, y)
          [s, b]
        else
          []
        end

      # Read back first: pipelines are created in the background until the
      # scheduler has reached their ops.
      bins = Enum.map(compiled ++ eager, &Nx.to_binary/1)
      stats = Nx.Vulkan.stats()
      {bins, stats.pipelines, stats.pipelines_pruned}
    end

    # Whole modules take lavapipe long to compile (about 45 s in all here).
    @tag timeout: 180_000
    test "kernels from pruned and whole modules give the same bits" do
      for type <- [:f32, :f64, :f16] do
        {pruned, n, n_pruned} = run(true, type)
        {whole, n_whole, 0} = run(false, type)
        assert pruned == whole, "#{type}"
        assert n_pruned > 0 and n_pruned <= n, "#{type}: #{n_pruned} of #{n} pruned"
        assert n_whole == n, "#{type}: #{n_whole} against #{n} pipelines"
      end
    end
  end
end
