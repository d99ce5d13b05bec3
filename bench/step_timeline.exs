# Where the wall time of a training or sampler step goes, host and GPU side
# by side.
#
#   mix run bench/step_timeline.exs [--model mlp|cnn|hmc|normal]
#                                   [--compiler evaluator|vulkan]
#                                   [--steps N] [--warmup N] [--show N]
#
# Runs the step on the default device and its default batching as a loop
# that reads each step's result back: mlp and cnn (bench/models.exs) are
# SGD steps that read the loss, hmc (bench/hmc.exs) a Hamiltonian Monte
# Carlo step of 64 dimensions and 10 leapfrog steps that reads its accept
# flag and feeds its position and key to the next, normal
# `Nx.Random.normal(key, shape: {1024})`, which reads its 1024 numbers and
# feeds its new key to the next. `--compiler evaluator`
# (the default for mlp and cnn) compiles the step ahead of time with
# Nx.Defn.Evaluator, `--compiler vulkan` (the default for hmc and normal) with
# Nx.Vulkan.Compiler (traced once, then replayed). Meanwhile the
# `[:nx_vulkan, :submit]`
# telemetry event records every batch: its submission, and its start and
# end on the GPU on the runtime's clock (`Nx.Vulkan.NIF.clock_ns/0`, through
# VK_EXT_calibrated_timestamps; devices without it print the step times
# only). Each step is split, medians over `--steps` (default 200) after
# `--warmup` (default 50) steps, into:
#
#   * host: until the step function returned (the compiler's work and the
#     backend enqueueing its ops);
#   * head: from the step's start to its first batch starting on the GPU;
#   * GPU busy: the sum of its batches' GPU time;
#   * starved: GPU idle between two batches because the next one had not
#     been submitted when the previous one ended (waiting for the host to
#     enqueue ops, or for the scheduler to submit them);
#   * launch: GPU idle between two batches after the next one was
#     submitted (submission to start);
#   * tail: from its last batch's end to the result on the host (completion
#     seen, the download, the return to Elixir).
#
# head + busy + starved + launch + tail is the step, so the figures say
# which side bounds it. `--show N` then lists the batches of N steps (those
# nearest the median step time): each batch's submission, GPU start and
# end from the step's start, its ops and GPU time, and the gap before it.
{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [
      model: :string,
      compiler: :string,
      steps: :integer,
      warmup: :integer,
      show: :integer
    ]
  )

model = Keyword.get(opts, :model, "mlp")

compiler =
  Keyword.get(opts, :compiler, if(model in ["hmc", "normal"], do: "vulkan", else: "evaluator"))

steps = Keyword.get(opts, :steps, 200)
warmup = Keyword.get(opts, :warmup, 50)
show = Keyword.get(opts, :show, 0)

if rest != [] or invalid != [] or model not in ["mlp", "cnn", "hmc", "normal"] or
     compiler not in ["evaluator", "vulkan"] or steps < 1 or warmup < 1 or show < 0 do
  IO.puts(
    :stderr,
    "usage: mix run bench/step_timeline.exs [--model mlp|cnn|hmc|normal] " <>
      "[--compiler evaluator|vulkan] [--steps N] [--warmup N] [--show N]"
  )

  System.halt(2)
end

Code.require_file("models.exs", __DIR__)
Code.require_file("hmc.exs", __DIR__)
alias Nx.Vulkan.NIF

Nx.default_backend(Nx.Vulkan.Backend)
index = Nx.Vulkan.default_device_index()
info = NIF.device_info(index)
defn_compiler = if compiler == "vulkan", do: Nx.Vulkan.Compiler, else: Nx.Defn.Evaluator

# {step, state}: step.(state) returns {state, the tensor a loop reads back}.
{step, state} =
  case model do
    "hmc" ->
      f =
        Nx.Defn.compile(
          &NxBench.Sampler.hmc_step(&1, &2, &3, steps: 10),
          [Nx.broadcast(0.0, {64}), Nx.Random.key(42), 0.1],
          compiler: defn_compiler
        )

      {fn {q, key} ->
         {q, key, accept} = f.(q, key, 0.1)
         {{q, key}, accept}
       end, {Nx.broadcast(0.0, {64}), Nx.Random.key(42)}}

    "normal" ->
      f =
        Nx.Defn.compile(&Nx.Random.normal(&1, shape: {1024}), [Nx.Random.key(42)],
          compiler: defn_compiler
        )

      {fn key ->
         {x, key} = f.(key)
         {key, x}
       end, Nx.Random.key(42)}

    _ ->
      {step, params, x, y} = NxBench.Steps.step(model, compiler: defn_compiler)
      {fn p -> step.(p, x, y) end, params}
  end

# A scalar result (a loss, an accept flag) is read as a number, others whole.
read = fn out -> if Nx.shape(out) == {}, do: Nx.to_number(out), else: Nx.to_binary(out) end

table = :ets.new(:step_timeline, [:public, :ordered_set])

:telemetry.attach(
  "step-timeline",
  [:nx_vulkan, :submit],
  &NxBench.Steps.record_timeline/4,
  table
)

# The handler takes effect within one telemetry interval.
interval = Application.get_env(:nx_vulkan, :telemetry_interval_ms, 500)
Process.sleep(2 * interval)

state =
  Enum.reduce(1..warmup, state, fn _, s ->
    {s, out} = step.(s)
    read.(out)
    s
  end)

:ok = Nx.Vulkan.synchronize()

{spans, _} =
  Enum.map_reduce(1..steps, state, fn _, s ->
    t0 = NIF.clock_ns()
    {s, out} = step.(s)
    th = NIF.clock_ns()
    read.(out)
    {{t0, th, NIF.clock_ns()}, s}
  end)

# Every batch of the steps delivered (they arrive every interval).
Process.sleep(3 * interval)
:telemetry.detach("step-timeline")
batches = :ets.tab2list(table)

median = fn list ->
  sorted = Enum.sort(list)
  Enum.at(sorted, div(length(sorted), 2))
end

us = fn ns -> :erlang.float_to_binary(ns / 1000, decimals: 1) end

IO.puts(
  "#{model} step through #{inspect(defn_compiler)} on #{info.name} (#{info.driver_name}), " <>
    "#{steps} steps after #{warmup}, medians in us"
)

rows =
  for {t0, th, t1} <- spans do
    mine = for {s, _, _, _} = b <- batches, s >= t0 and s <= t1, do: b
    timed = Enum.filter(mine, fn {_, start, _, _} -> start > 0 end)

    base = %{
      step: t1 - t0,
      host: th - t0,
      batches: length(mine),
      ops: Enum.sum(for {_, _, _, ops} <- mine, do: ops)
    }

    if timed == [] or length(timed) != length(mine) do
      base
    else
      {_, first_start, _, _} = hd(timed)
      {_, _, last_end, _} = List.last(timed)

      {starved, launch} =
        timed
        |> Enum.zip(tl(timed))
        |> Enum.reduce({0, 0}, fn {{_, _, prev_end, _}, {sub, start, _, _}}, {st, la} ->
          gap = max(start - prev_end, 0)
          waited = min(max(sub - prev_end, 0), gap)
          {st + waited, la + gap - waited}
        end)

      Map.merge(base, %{
        head: first_start - t0,
        busy: Enum.sum(for {_, start, stop, _} <- timed, do: stop - start),
        starved: starved,
        launch: launch,
        tail: t1 - last_end
      })
    end
  end

keys = [:step, :host, :head, :busy, :starved, :launch, :tail]
complete = Enum.filter(rows, &Map.has_key?(&1, :busy))

IO.puts(
  "batches per step #{median.(Enum.map(rows, & &1.batches))}, " <>
    "device ops per step #{median.(Enum.map(rows, & &1.ops))}"
)

if complete == [] do
  IO.puts(
    "step #{us.(median.(Enum.map(rows, & &1.step)))}, host #{us.(median.(Enum.map(rows, & &1.host)))}"
  )

  IO.puts("(no GPU start and end times: the device does not calibrate its timestamps)")
else
  IO.puts(Enum.map_join(keys, " ", &String.pad_leading(Atom.to_string(&1), 8)))

  IO.puts(
    Enum.map_join(keys, " ", fn k ->
      complete |> Enum.map(&Map.fetch!(&1, k)) |> median.() |> us.() |> String.pad_leading(8)
    end)
  )
end

if show > 0 and complete != [] do
  mid = median.(Enum.map(complete, & &1.step))

  spans
  |> Enum.sort_by(fn {t0, _, t1} -> abs(t1 - t0 - mid) end)
  |> Enum.take(show)
  |> Enum.each(fn {t0, th, t1} ->
    mine = for {s, _, _, _} = b <- batches, s >= t0 and s <= t1, do: b

    IO.puts(
      "\nstep of #{us.(t1 - t0)} us, host returned at #{us.(th - t0)}; " <>
        "per batch (us from the step's start): submit, start, end, ops, GPU, gap before"
    )

    Enum.reduce(mine, nil, fn {sub, start, stop, ops}, prev_end ->
      gap = if prev_end, do: us.(start - prev_end), else: "-"

      IO.puts(
        Enum.map_join(
          [us.(sub - t0), us.(start - t0), us.(stop - t0), ops, us.(stop - start), gap],
          " ",
          &String.pad_leading(to_string(&1), 8)
        )
      )

      stop
    end)
  end)
end
