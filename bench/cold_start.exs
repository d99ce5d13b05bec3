# Cold start: the first training steps on a newly opened device whose
# pipelines must all be created, under two settings of the device:
#
#   * `--compare threads` (the default): pipelines created in the
#     background by pipeline threads (`pipeline_threads: :auto`) against
#     the default (each created by the thread that queues its op, one at a
#     time);
#   * `--compare prune`: pipelines from SPIR-V pruned for their
#     specialization constants (the default) against whole modules (the
#     `no_spirv_prune` device option).
#
#   __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true \
#     mix run bench/cold_start.exs [--model mlp|cnn|hmc|both|all] [--rounds N] [--compare threads|prune]
#
# (the two variables keep NVIDIA's and Mesa's own shader caches out of the
# figures). For each round, model, path and setting, the default device is
# reopened with `disable_disk_cache: true` and the setting, and the step of
# bench/models.exs (`mlp`, `cnn`; `both` is the two) or the HMC step of
# bench/hmc.exs (`hmc`: 10 leapfrog steps over 64 f32, with Nx.Random;
# `all` is the three) runs three times, each timed to its loss (for HMC
# its acceptance) read on the host: through `Nx.Vulkan.Compiler` (after `clear_cache/0`: the first call
# traces, plans, creates the pipelines and runs) and through
# `Nx.Defn.Evaluator` compiled ahead of time (the compile included in the
# first call). Prints the first, second and third call in ms and the
# pipelines created (of them pruned), one row per round; the figures of
# the two settings alternate.
Code.require_file("models.exs", __DIR__)
Code.require_file("hmc.exs", __DIR__)

{opts, _, invalid} =
  OptionParser.parse(System.argv(), strict: [model: :string, rounds: :integer, compare: :string])

if invalid != [] or Keyword.get(opts, :compare, "threads") not in ["threads", "prune"] do
  IO.puts(
    :stderr,
    "usage: mix run bench/cold_start.exs [--model mlp|cnn|hmc|both|all] [--rounds N] [--compare threads|prune]"
  )

  System.halt(1)
end

# {label, device options} of the two settings, the one under test first.
settings =
  case Keyword.get(opts, :compare, "threads") do
    "threads" -> [{"threads auto", %{pipeline_threads: :auto}}, {"threads off", %{}}]
    "prune" -> [{"pruned", %{}}, {"whole", %{no_spirv_prune: true}}]
  end

models =
  case Keyword.get(opts, :model, "both") do
    "mlp" -> [:mlp]
    "cnn" -> [:cnn]
    "hmc" -> [:hmc]
    "all" -> [:mlp, :cnn, :hmc]
    _ -> [:mlp, :cnn]
  end

rounds = Keyword.get(opts, :rounds, 2)
Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.default_backend(Nx.Vulkan.Backend)

defmodule ColdStart do
  @moduledoc false

  # {step, its three arguments, the number a call's result is read by}.
  def data(:mlp), do: {&NxBench.Models.mlp_step/3, NxBench.Data.mlp_data(), &elem(&1, 1)}
  def data(:cnn), do: {&NxBench.Models.cnn_step/3, NxBench.Data.cnn_data(), &elem(&1, 1)}

  def data(:hmc) do
    step = &NxBench.Sampler.hmc_step(&1, &2, &3, steps: 10)
    q = Nx.iota({64}, type: :f32) |> Nx.divide(64)
    {step, {q, Nx.Random.key(42), Nx.tensor(0.1, type: :f32)}, &elem(&1, 2)}
  end

  # ms of each of three calls of the step, and the device's pipelines
  # created and pruned by the end.
  def run(model, path, device_opts) do
    Nx.Vulkan.reopen(nil, Map.put(device_opts, :disable_disk_cache, true))
    Nx.Vulkan.Compiler.clear_cache()
    # Data on the new context.
    {step, {params, x, y}, read} = data(model)

    {times, _} =
      Enum.map_reduce(1..3, nil, fn _, aot ->
        {us, aot} =
          :timer.tc(fn ->
            fun =
              case path do
                :compiler ->
                  Nx.Defn.jit(step, compiler: Nx.Vulkan.Compiler)

                :evaluator ->
                  aot || Nx.Defn.compile(step, [params, x, y], compiler: Nx.Defn.Evaluator)
              end

            Nx.to_number(read.(fun.(params, x, y)))
            if path == :evaluator, do: fun
          end)

        {us / 1000, aot}
      end)

    s = Nx.Vulkan.stats()
    {times, s.pipelines, s.pipelines_pruned}
  end
end

IO.puts(
  "cold start (ms per call; pipelines created / pruned), device reopened for each row, " <>
    "disk cache off"
)

IO.puts(
  String.pad_trailing("model path setting", 32) <>
    String.pad_leading("first", 10) <>
    String.pad_leading("second", 10) <>
    String.pad_leading("third", 10) <> String.pad_leading("pipelines", 16)
)

for round <- 1..rounds, model <- models, path <- [:compiler, :evaluator] do
  order = if rem(round, 2) == 1, do: settings, else: Enum.reverse(settings)

  for {name, device_opts} <- order do
    {[a, b, c], n, pruned} = ColdStart.run(model, path, device_opts)
    label = "#{model} #{path} #{name}"

    IO.puts(
      String.pad_trailing(label, 32) <>
        for(
          t <- [a, b, c],
          into: "",
          do: String.pad_leading(:erlang.float_to_binary(t, decimals: 1), 10)
        ) <>
        String.pad_leading("#{n} / #{pruned}", 16)
    )
  end
end
