# GPU time, barriers and reordered ops per training step through
# Nx.Defn.Evaluator, for several `reorder_window` settings side by side.
#
#   mix run bench/step_gpu.exs [--model mlp|cnn|both] [--windows "32 off"]
#                              [--rounds N] [--warmup N] [--steps N]
#
# For each round, model and window (a `reorder_window` device option: an
# integer 1..64, or `off`), the default device is reopened with that
# option, the step (bench/models.exs, compiled ahead of time) runs
# `--warmup` times (default 100: the pool fills and the GPU reaches its
# clocks), then `--steps` times (default 100) between two reads of
# `Nx.Vulkan.stats/0`. Prints per step: the GPU time of its batches
# (`gpu_busy_ns`, from the batches' timestamps; 0 where the queue writes
# none), barriers, ops recorded ahead of an earlier one, submissions and
# device ops; then the batches of one more step as {ops, GPU us} from the
# `[:nx_vulkan, :submit]` event. Wall-clock step times are
# bench/nx_bench.exs's business: this script reads the device side.
{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [
      model: :string,
      windows: :string,
      rounds: :integer,
      warmup: :integer,
      steps: :integer
    ]
  )

usage = fn ->
  IO.puts(
    :stderr,
    "usage: mix run bench/step_gpu.exs [--model mlp|cnn|both] [--windows \"32 off\"] " <>
      "[--rounds N] [--warmup N] [--steps N]"
  )

  System.halt(2)
end

models =
  case Keyword.get(opts, :model, "both") do
    "both" -> ["mlp", "cnn"]
    m when m in ["mlp", "cnn"] -> [m]
    _ -> usage.()
  end

windows =
  opts
  |> Keyword.get(:windows, "32 off")
  |> String.split()
  |> Enum.map(fn
    "off" ->
      :off

    w ->
      case Integer.parse(w) do
        {n, ""} when n in 1..64 -> n
        _ -> usage.()
      end
  end)

rounds = Keyword.get(opts, :rounds, 1)
warmup = Keyword.get(opts, :warmup, 100)
steps = Keyword.get(opts, :steps, 100)

if rest != [] or invalid != [] or windows == [] or rounds < 1 or warmup < 1 or steps < 1,
  do: usage.()

Code.require_file("models.exs", __DIR__)

Nx.default_backend(Nx.Vulkan.Backend)
info = Nx.Vulkan.NIF.device_info(Nx.Vulkan.default_device_index())
IO.puts("#{info.name} (#{info.driver_name} #{info.driver_info})")
interval = Application.get_env(:nx_vulkan, :telemetry_interval_ms, 500)

for round <- 1..rounds, model <- models, window <- windows do
  Nx.Vulkan.reopen(nil, %{reorder_window: window})

  {step, params, x, y} = NxBench.Steps.evaluator(model)
  run = fn n, p -> NxBench.Steps.run(step, n, p, x, y) end

  table = :ets.new(:step_gpu, [:public, :ordered_set])
  :telemetry.attach("step-gpu", [:nx_vulkan, :submit], &NxBench.Steps.record_submit/4, table)
  # The handler takes effect within one telemetry interval.
  Process.sleep(2 * interval)
  p = run.(warmup, params)
  Nx.Vulkan.synchronize()
  s0 = Nx.Vulkan.stats()
  p = run.(steps, p)
  Nx.Vulkan.synchronize()
  s1 = Nx.Vulkan.stats()
  _ = run.(1, p)
  Nx.Vulkan.synchronize()
  last_batches = Nx.Vulkan.stats().submits - s1.submits
  Process.sleep(3 * interval)
  :telemetry.detach("step-gpu")

  batches =
    :ets.tab2list(table)
    |> Enum.map(fn {_, ops, ns} -> {ops, Float.round(ns / 1000, 1)} end)
    |> Enum.take(-last_batches)

  per = fn key -> Float.round((s1[key] - s0[key]) / steps, 1) end

  IO.puts(
    "round #{round} #{model} reorder_window=#{window}: GPU #{Float.round((s1.gpu_busy_ns - s0.gpu_busy_ns) / steps / 1000, 1)} us/step, " <>
      "barriers #{per.(:barriers)}, reordered #{per.(:ops_reordered)}, " <>
      "submits #{per.(:submits)}, ops #{per.(:ops_enqueued)}"
  )

  IO.puts("  one step's batches {ops, GPU us}: #{inspect(batches, limit: :infinity)}")
end
