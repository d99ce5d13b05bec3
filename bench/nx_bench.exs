# Nx-level benchmark of nx_vulkan: tiny-op latency and training steps.
#
#   mix run bench/nx_bench.exs [--csv-out FILE] [--quick] [--ops N] [--steps N]
#                              [--busy-ms MS]
#
#   --csv-out FILE  also write the figures as CSV (`impl,test,dtype,shape,
#                   metric,value`, the schema shared by the benchmarks of
#                   this project; values formatted as C's %.6g)
#   --ops N         tiny ops per chain / independent run (default 10000)
#   --steps N       timed training steps per model (default 30)
#   --busy-ms MS    GPU work (1024x1024 products) before each model's
#                   warm-up steps (default 500, 0 with --quick;
#                   CPU devices skip it): a GPU that idled lowers its
#                   clocks, and the steps' short batches alone do not
#                   raise them
#   --quick         smoke run for CI (ops 200, 2 runs per figure, 100
#                   to_number iterations, 1 warm-up and 3 timed training
#                   steps); explicit options still win
#
# Everything runs on the default Vulkan device with the default device
# configuration (what a user gets: no `:device_options`), with
# Nx.Vulkan.Backend as the default backend and Nx.Defn.Evaluator (Nx's
# default) as the defn compiler. Rows of impl `nx_vulkan_nx` go through Nx,
# rows of impl `nx_vulkan_nif` call Nx.Vulkan.NIF directly on the same device
# context (the floor under the Nx figures). Tiny-op results are checked.
#
# Figures (CSV rows; 16-element f32 tensors for chain and independent):
#
#   * chain (us_per_op): x = x + 1, N times, each op consuming the previous
#     result, timed from the first op to the final value on the host
#     (Nx.to_flat_list / NIF.download). Through Nx this is `Nx.add(x, 1)`
#     as a user writes it; the NIF adds a resident tensor of ones. Median of
#     5 runs after one untimed warm-up run.
#   * chain_tensor (us_per_op, Nx only): the same chain as
#     `Nx.add(x, ones)`, ones a device tensor of the same shape.
#   * independent (us_per_op): N ops y_i = x + 1 on the same input, results
#     dropped, timed until `Nx.Vulkan.synchronize/1` (NIF.synchronize/1)
#     returns. Median of 5 runs after a warm-up run.
#   * nx_frontend (us_per_op): the same N `Nx.add(x, 1)` on
#     NxBench.NullBackend (bench/models.exs), whose callbacks do nothing:
#     what Nx itself costs per op, the floor under the Nx rows.
#   * to_number (us): `Nx.add(x, 1) |> Nx.to_number()` on a scalar f32
#     tensor, a fresh result each time; median of 1000 timed iterations
#     after 100 untimed ones.
#   * read_completed (us): `Nx.to_number/1` of one scalar f32 result again
#     and again once `Nx.Vulkan.synchronize/1` has seen it complete (no
#     device work left); median of as many timed reads.
#   * count (us; shape column: the input's): `Nx.sum(Nx.greater(x, 0.0))
#     |> Nx.to_number()` on a 4096x4096 f32 device tensor (256x256 with
#     --quick), as an accuracy metric counts; median of 100 timed calls
#     after 3 untimed ones.
#   * mlp_step, cnn_step (ms): one SGD step (lr 0.01) of the schema's MLP
#     (784-512-512-10, batch 128) and CNN (3x3 conv to 16 channels, relu,
#     2x2 max pool, dense to 10; batch 128 of 1x28x28), written in plain
#     defn with value_and_grad and called as a user calls a defn function
#     (so each call includes tracing the expression). Data and weights come
#     from a fixed :rand seed. After 500 ms of other GPU work
#     (--busy-ms), warm-up steps until the pool is steady (at least 20,
#     then on until the process has garbage-collected 4 times, which
#     returns dropped tensors' buffers to the pool, and neither the last
#     two whole intervals between collections nor the last 20 steps made a
#     device allocation; at most 200; the table's "warm-up steps"), then
#     30 timed steps, each feeding its parameters to the next, each timed
#     until its loss is on the host (Nx.to_number); median.
#   * mlp_step_aot, cnn_step_aot (ms): the same steps compiled ahead of
#     time with Nx.Defn.compile/3 and Nx.Defn.Evaluator (the expression is
#     traced once; each step evaluates it).
#   * mlp_step_compiled, cnn_step_compiled (ms): the same steps with
#     Nx.Vulkan.Compiler as the defn compiler (the expression is traced
#     once; later steps replay its device calls); *_compiled_gc with the
#     option garbage_collect: true (the process collects after each step).
#   * pool_steady_device_allocs (count; shape column: the model): device
#     memory allocations made by the pool (`Nx.Vulkan.stats/1` key
#     pool_allocations) during the timed steps of the model; 0 means every
#     buffer came from the pool.
#   * hw,device: the device's name, commas removed, in the shape column
#     (value 0).
#
# The training steps run under `Nx.Vulkan.with_host_fallback(:raise, ...)`.
# If an op would run on the host, the error naming it is printed and the
# model is run again with fallbacks allowed; the counts of
# `Nx.Vulkan.fallbacks/0` are printed either way.
#
# The standard output shows more, to read the figures with:
#
#   * enqueue us/op: time until the last op of a run returned (the host's
#     share), next to e2e;
#   * the Nx chain with `{Nx.Vulkan.Backend, device: index}` as default
#     backend (tensors created without resolving the default device index)
#     and with a resident tensor of ones instead of the literal 1 (the same
#     device work as the NIF chain, so the difference is Nx's host cost);
#     to_number with the explicit device too;
#   * device ops and submits per op (`ops_enqueued`, `submits` counters);
#   * per model: the mean step time (each step waits for its loss only,
#     so a step's device work may still run while the next is queued: the
#     mean is the throughput, the median can sit at either of two modes),
#     the median time until the step function returned (host
#     ms: the host's share; the rest of a step is waiting for its loss),
#     the GPU time per step (GPU ms: `gpu_busy_ns` of `Nx.Vulkan.stats/1`,
#     from timestamps at the start and end of each batch, over the timed
#     steps; a batch's first ops are not counted while they stay under two
#     ops and 2^16 elements of work, such as the loss read's batch),
#     the first loss of the warm-up and the last timed loss, device
#     allocations in the second half of the timed steps, device ops and
#     submits per step, the pool's peak and the host fallbacks.

Code.require_file("models.exs", __DIR__)

defmodule NxBench do
  @moduledoc false
  alias Nx.Vulkan.NIF

  ## Statistics and formatting

  def median(list) do
    sorted = Enum.sort(list)
    n = length(sorted)
    mid = div(n, 2)

    if rem(n, 2) == 1,
      do: Enum.at(sorted, mid),
      else: (Enum.at(sorted, mid - 1) + Enum.at(sorted, mid)) / 2
  end

  def now, do: System.monotonic_time(:nanosecond)

  # C's "%.6g".
  def g6(value) when is_integer(value), do: Integer.to_string(value)
  def g6(value) when value == 0, do: "0"

  def g6(value) when is_float(value) do
    exp = value |> abs() |> :math.log10() |> floor()
    # Rounding to 6 significant digits can carry into the next decade.
    exp = if abs(round_sig(value, exp)) >= :math.pow(10, exp + 1), do: exp + 1, else: exp

    if exp < -4 or exp >= 6 do
      mantissa = value / :math.pow(10, exp)
      sign = if exp < 0, do: "-", else: "+"
      digits = exp |> abs() |> Integer.to_string() |> String.pad_leading(2, "0")
      strip(:erlang.float_to_binary(mantissa, decimals: 5)) <> "e" <> sign <> digits
    else
      strip(:erlang.float_to_binary(value, decimals: max(5 - exp, 0)))
    end
  end

  defp round_sig(value, exp), do: Float.round(value / :math.pow(10, exp), 5) * :math.pow(10, exp)

  defp strip(string) do
    if String.contains?(string, "."),
      do: string |> String.trim_trailing("0") |> String.trim_trailing("."),
      else: string
  end

  def fmt(value, decimals \\ 3)
  def fmt(value, _decimals) when is_integer(value), do: Integer.to_string(value)
  def fmt(value, decimals), do: :erlang.float_to_binary(value / 1, decimals: decimals)

  # Prints rows of strings under headers: first column left-aligned, the
  # others right-aligned.
  def table(headers, rows) do
    widths =
      Enum.zip_with([headers | rows], fn column ->
        column |> Enum.map(&String.length/1) |> Enum.max()
      end)

    for row <- [headers | rows] do
      row
      |> Enum.zip(widths)
      |> Enum.with_index()
      |> Enum.map_join("  ", fn
        {{cell, w}, 0} -> String.pad_trailing(cell, w)
        {{cell, w}, _} -> String.pad_leading(cell, w)
      end)
      |> IO.puts()
    end
  end

  ## Tiny ops through Nx

  def f32(list), do: for(x <- list, into: <<>>, do: <<x::float-32-native>>)

  def vec16(value), do: Nx.tensor(List.duplicate(value, 16), type: :f32)

  # {enqueue us/op, e2e us/op} of a chain of n Nx.add(x, 1).
  def nx_chain(index, n, one \\ 1) do
    x0 = vec16(0.0)
    one = if is_number(one), do: one, else: vec16(1.0)
    :ok = Nx.Vulkan.synchronize(index)
    t0 = now()
    x = Enum.reduce(1..n, x0, fn _, acc -> Nx.add(acc, one) end)
    t1 = now()
    [v | _] = Nx.to_flat_list(x)
    t2 = now()
    if v != n * 1.0, do: raise("Nx chain result #{v}, expected #{n}")
    {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
  end

  def nx_independent(index, n) do
    x = vec16(2.0)
    :ok = Nx.Vulkan.synchronize(index)
    t0 = now()
    first = Nx.add(x, 1)
    Enum.each(2..n//1, fn _ -> Nx.add(x, 1) end)
    t1 = now()
    :ok = Nx.Vulkan.synchronize(index)
    t2 = now()
    [v | _] = Nx.to_flat_list(first)
    if v != 3.0, do: raise("Nx independent result #{v}, expected 3.0")
    {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
  end

  ## Tiny ops through the NIF

  def nif_chain(dev, n) do
    one = NIF.upload(dev, :f32, f32(List.duplicate(1.0, 16)))
    x0 = NIF.upload(dev, :f32, f32(List.duplicate(0.0, 16)))
    :ok = NIF.synchronize(dev)
    t0 = now()

    x = Enum.reduce(1..n, x0, fn _, acc -> NIF.binary(:add, [16], acc, 0, nil, one, 0, nil) end)

    t1 = now()
    <<v::float-32-native, _::binary>> = NIF.download(x, 0, 16)
    t2 = now()
    if v != n * 1.0, do: raise("NIF chain result #{v}, expected #{n}")
    {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
  end

  def nif_independent(dev, n) do
    one = NIF.upload(dev, :f32, f32(List.duplicate(1.0, 16)))
    x = NIF.upload(dev, :f32, f32(List.duplicate(2.0, 16)))
    :ok = NIF.synchronize(dev)
    t0 = now()
    first = NIF.binary(:add, [16], x, 0, nil, one, 0, nil)
    Enum.each(2..n//1, fn _ -> NIF.binary(:add, [16], x, 0, nil, one, 0, nil) end)
    t1 = now()
    :ok = NIF.synchronize(dev)
    t2 = now()
    <<v::float-32-native, _::binary>> = NIF.download(first, 0, 16)
    if v != 3.0, do: raise("NIF independent result #{v}, expected 3.0")
    {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
  end

  # independent ops through Nx on NxBench.NullBackend, whose callbacks do
  # nothing: {us/op, us/op}, what Nx's own front end costs per
  # `Nx.add(x, 1)` (the floor under the Nx rows).
  def nx_frontend(n) do
    with_backend(NxBench.NullBackend, fn ->
      x = NxBench.NullBackend.null(Nx.template({16}, :f32))
      t0 = now()
      Enum.each(1..n//1, fn _ -> Nx.add(x, 1) end)
      us = (now() - t0) / n / 1000
      {us, us}
    end)
  end

  # One warm-up run, then `reps` timed runs: {median enqueue, median e2e,
  # device counters per op over the timed runs}.
  def measure(index, fun, n, reps) do
    fun.()
    s0 = Nx.Vulkan.stats(index)
    runs = for _ <- 1..reps, do: fun.()
    s1 = Nx.Vulkan.stats(index)

    per_op = fn key -> (s1[key] - s0[key]) / (n * reps) end

    %{
      enqueue: median(Enum.map(runs, &elem(&1, 0))),
      e2e: median(Enum.map(runs, &elem(&1, 1))),
      ops: per_op.(:ops_enqueued),
      submits: per_op.(:submits)
    }
  end

  # Runs fun with `backend` as the process's default backend.
  def with_backend(backend, fun) do
    previous = Nx.default_backend(backend)

    try do
      fun.()
    after
      Nx.default_backend(previous)
    end
  end

  def to_number_us(iters) do
    x = Nx.tensor(1.0, type: :f32)
    for _ <- 1..max(div(iters, 10), 10), do: Nx.add(x, 1) |> Nx.to_number()

    median_us(iters, "to_number", fn -> Nx.add(x, 1) |> Nx.to_number() end)
  end

  # Median us of iters calls of fun, each checked to return 2.0.
  defp median_us(iters, what, fun) do
    times =
      for _ <- 1..iters do
        t0 = now()
        v = fun.()
        t1 = now()
        if v != 2.0, do: raise("#{what} result #{v}, expected 2.0")
        (t1 - t0) / 1000
      end

    median(times)
  end

  def read_completed_us(iters) do
    y = Nx.add(Nx.tensor(1.0, type: :f32), 1)
    :ok = Nx.Vulkan.synchronize()

    median_us(iters, "read_completed", fn -> Nx.to_number(y) end)
  end

  # Nx.sum(Nx.greater(x, 0.0)) |> Nx.to_number() on a side x side f32
  # device tensor (a count, as an accuracy metric makes one): median us of
  # iters calls after 3 warm-up calls, and device ops per call.
  def count_us(index, side, iters) do
    n = side * side
    x = Nx.iota({side, side}, type: :f32) |> Nx.subtract(div(n, 2))
    run = fn -> Nx.sum(Nx.greater(x, 0.0)) |> Nx.to_number() end
    for _ <- 1..3, do: run.()
    s0 = Nx.Vulkan.stats(index)

    times =
      for _ <- 1..iters do
        t0 = now()
        v = run.()
        t1 = now()
        if v != div(n, 2) - 1, do: raise("count result #{v}, expected #{div(n, 2) - 1}")
        (t1 - t0) / 1000
      end

    s1 = Nx.Vulkan.stats(index)
    {median(times), (s1.ops_enqueued - s0.ops_enqueued) / iters}
  end

  ## Training steps

  # The process's garbage collections so far are counted by the changes of
  # its minor-collection counter (which a full sweep resets).
  defp gc_marker do
    {:garbage_collection, info} = Process.info(self(), :garbage_collection)
    info[:minor_gcs]
  end

  # Warm-up steps: at least `warmup`; with `steady`, then on until the pool
  # is steady, at most 10 x `warmup` in all. A dropped tensor returns its
  # buffer to the pool only when the process collects garbage, so the pool
  # grows until the most garbage held between two collections fits:
  # steady means at least 4 collections since the warm-up began, no device
  # allocation since the third-latest (two whole intervals between
  # collections, and the steps after them, allocated nothing) and none in
  # the last 20 steps: with one whole interval and 10 steps, a CNN step
  # that ended its warm-up at 20 steps allocated once in its timed steps,
  # most likely because two of their collections fell further apart than
  # any two of the warm-up's.
  # Returns {params, first loss, warm-up steps}.
  def warm_up(index, step_fun, {params, x, y}, warmup, steady) do
    st0 = %{p: params, first: nil, mark: gc_marker(), gc_steps: [], last_alloc: 0}

    Stream.iterate(1, &(&1 + 1))
    |> Enum.reduce_while(st0, fn i, st ->
      a0 = Nx.Vulkan.stats(index).pool_allocations
      {p, loss} = step_fun.(st.p, x, y)
      loss = Nx.to_number(loss)
      allocated = Nx.Vulkan.stats(index).pool_allocations != a0
      mark = gc_marker()

      st = %{
        st
        | p: p,
          first: st.first || loss,
          mark: mark,
          gc_steps: if(mark != st.mark, do: [i | st.gc_steps], else: st.gc_steps),
          last_alloc: if(allocated, do: i, else: st.last_alloc)
      }

      done =
        i >= warmup and
          (not steady or i >= 10 * warmup or steady?(st.gc_steps, st.last_alloc, i))

      if done, do: {:halt, {p, st.first, i}}, else: {:cont, st}
    end)
  end

  # gc_steps: the steps in which the process collected, latest first.
  defp steady?([_last, _previous, before | _] = gc_steps, last_alloc, i),
    do: length(gc_steps) >= 4 and last_alloc < before and i - last_alloc >= 20

  defp steady?(_gc_steps, _last_alloc, _i), do: false

  # `cfg.busy_ms` of GPU work, warm-up steps, then `cfg.steps` timed steps
  # of step_fun under the fallback policy `mode`. cfg: %{warmup, steady,
  # busy_ms, steps} (see warm_up/5 and NxBench.Steps.busy_gpu/2). The GPU
  # work comes first: between the warm-up and the timed steps its garbage
  # would move the process's collections to other points of the steps.
  def train(index, step_fun, {params, x, y}, cfg, mode) do
    steps = cfg.steps

    Nx.Vulkan.with_host_fallback(mode, fn ->
      :ok = NxBench.Steps.busy_gpu(index, cfg.busy_ms)

      {params, first_loss, warm_steps} =
        warm_up(index, step_fun, {params, x, y}, cfg.warmup, cfg.steady)

      :ok = Nx.Vulkan.synchronize(index)
      s0 = Nx.Vulkan.stats(index)

      # Per step: time, and device allocations (counters read outside the
      # timed span).
      {per_step, {_params, last_loss}} =
        Enum.map_reduce(1..steps, {params, nil}, fn _, {p, _} ->
          a0 = Nx.Vulkan.stats(index).pool_allocations
          t0 = now()
          {p, loss} = step_fun.(p, x, y)
          th = now()
          loss = Nx.to_number(loss)
          t1 = now()
          a1 = Nx.Vulkan.stats(index).pool_allocations
          {{(t1 - t0) / 1.0e6, a1 - a0, (th - t0) / 1.0e6}, {p, loss}}
        end)

      s1 = Nx.Vulkan.stats(index)
      times = Enum.map(per_step, &elem(&1, 0))
      late_allocs = per_step |> Enum.drop(div(steps, 2)) |> Enum.map(&elem(&1, 1)) |> Enum.sum()

      %{
        ms: median(times),
        mean_ms: Enum.sum(times) / length(times),
        min_ms: Enum.min(times),
        host_ms: median(Enum.map(per_step, &elem(&1, 2))),
        gpu_ms: (s1.gpu_busy_ns - s0.gpu_busy_ns) / steps / 1.0e6,
        first_loss: first_loss,
        last_loss: last_loss,
        device_allocs: s1.pool_allocations - s0.pool_allocations,
        late_allocs: late_allocs,
        warm_steps: warm_steps,
        ops_per_step: (s1.ops_enqueued - s0.ops_enqueued) / steps,
        submits_per_step: (s1.submits - s0.submits) / steps,
        peak_mib: s1.pool_bytes_peak / 1_048_576
      }
    end)
  end

  # Runs `train` with fallbacks raising; if an op falls back, reports it
  # and runs again with fallbacks allowed.
  def train_checked(index, name, step_fun, data, cfg) do
    Nx.Vulkan.reset_fallbacks()

    result =
      try do
        train(index, step_fun, data, cfg, :raise)
      rescue
        e in ArgumentError ->
          message = Exception.message(e)

          if not String.contains?(message, "would run on the host"),
            do: reraise(e, __STACKTRACE__)

          IO.puts("#{name}: host fallback under :raise: #{message}")
          IO.puts("#{name}: running again with host fallbacks allowed")
          Nx.Vulkan.reset_fallbacks()
          train(index, step_fun, data, cfg, :allow)
      end

    Map.put(result, :fallbacks, Nx.Vulkan.fallbacks())
  end
end

alias NxBench, as: B

{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [
      csv_out: :string,
      quick: :boolean,
      ops: :integer,
      steps: :integer,
      busy_ms: :integer
    ]
  )

if rest != [] or invalid != [] do
  IO.puts(
    :stderr,
    "usage: mix run bench/nx_bench.exs [--csv-out FILE] [--quick] [--ops N] [--steps N] [--busy-ms MS]"
  )

  System.halt(2)
end

quick = Keyword.get(opts, :quick, false)
ops = Keyword.get(opts, :ops, if(quick, do: 200, else: 10_000))
steps = Keyword.get(opts, :steps, if(quick, do: 3, else: 30))
warmup_steps = if quick, do: 1, else: 20
busy_ms = Keyword.get(opts, :busy_ms, if(quick, do: 0, else: 500))
reps = if quick, do: 2, else: 5
to_number_iters = if quick, do: 100, else: 1000
{count_side, count_iters} = if quick, do: {256, 10}, else: {4096, 100}

if ops < 1 or steps < 1 or busy_ms < 0,
  do: raise(ArgumentError, "--ops and --steps must be positive, --busy-ms not negative")

Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.default_backend(Nx.Vulkan.Backend)
Nx.Defn.global_default_options(compiler: Nx.Defn.Evaluator)
Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)

index = Nx.Vulkan.default_device_index()
info = Nx.Vulkan.NIF.device_info(index)
dev = Nx.Vulkan.device(index)

IO.puts("device #{index}: #{info.name} (#{info.driver_name} #{info.driver_info})")

IO.puts(
  "OTP #{System.otp_release()}, Elixir #{System.version()}, #{System.schedulers_online()} schedulers; " <>
    "ops #{ops}, runs #{reps}, to_number #{to_number_iters}, steps #{warmup_steps}+#{steps}"
)

# Tiny ops (each measure/4 warms up with one untimed run). The rows with
# an explicit `device: index` in the backend options do the same work
# without resolving the default device on each new tensor.
explicit = {Nx.Vulkan.Backend, device: index}
measure = fn fun -> B.measure(index, fun, ops, reps) end
chain_nx = measure.(fn -> B.nx_chain(index, ops) end)
chain_nx_dev = B.with_backend(explicit, fn -> measure.(fn -> B.nx_chain(index, ops) end) end)
chain_nx_ones = measure.(fn -> B.nx_chain(index, ops, :ones) end)
chain_nif = measure.(fn -> B.nif_chain(dev, ops) end)
indep_nx = measure.(fn -> B.nx_independent(index, ops) end)
indep_nif = measure.(fn -> B.nif_independent(dev, ops) end)
indep_frontend = measure.(fn -> B.nx_frontend(ops) end)
to_number = B.to_number_us(to_number_iters)
to_number_dev = B.with_backend(explicit, fn -> B.to_number_us(to_number_iters) end)
read_completed = B.read_completed_us(to_number_iters)
{count, count_ops} = B.count_us(index, count_side, count_iters)

IO.puts("\ntiny ops, 16 f32, #{ops} ops, median of #{reps} runs")

B.table(
  ["path", "enqueue us/op", "e2e us/op", "device ops/op", "submits/op"],
  for {label, m} <- [
        {"chain, Nx.add(x, 1)", chain_nx},
        {"chain, Nx.add(x, 1), backend device: #{index}", chain_nx_dev},
        {"chain, Nx.add(x, ones)", chain_nx_ones},
        {"chain, NIF.binary(:add)", chain_nif},
        {"independent, Nx.add(x, 1) + synchronize", indep_nx},
        {"independent, NIF.binary(:add) + synchronize", indep_nif},
        {"independent, Nx.add(x, 1) on a backend doing nothing", indep_frontend}
      ] do
    [label, B.fmt(m.enqueue), B.fmt(m.e2e), B.fmt(m.ops, 2), B.fmt(m.submits, 4)]
  end
)

IO.puts(
  "to_number, Nx.add(x, 1) |> Nx.to_number(), median of #{to_number_iters}: " <>
    "#{B.fmt(to_number, 1)} us (backend device: #{index}: #{B.fmt(to_number_dev, 1)} us)"
)

IO.puts(
  "read_completed, Nx.to_number() of a completed result, median of #{to_number_iters}: " <>
    "#{B.fmt(read_completed, 2)} us"
)

IO.puts(
  "count, Nx.sum(Nx.greater(x, 0.0)) |> Nx.to_number(), #{count_side}x#{count_side} f32, " <>
    "median of #{count_iters}: #{B.fmt(count, 1)} us, #{B.fmt(count_ops, 1)} device ops"
)

# Training steps.
models = [
  {"mlp_step", "784-512-512-10/128", &NxBench.Models.mlp_step/3, &NxBench.Data.mlp_data/0},
  {"cnn_step", "28x28x16/128", &NxBench.Models.cnn_step/3, &NxBench.Data.cnn_data/0}
]

# Each model through Nx.Defn.Evaluator, as a defn call (test mlp_step,
# cnn_step) and compiled ahead of time with Nx.Defn.compile/3
# (mlp_step_aot, cnn_step_aot), and through Nx.Vulkan.Compiler
# (mlp_step_compiled, cnn_step_compiled). mlp_step_compiled_gc,
# cnn_step_compiled_gc: with garbage_collect: true.
compilers = [
  {[compiler: Nx.Defn.Evaluator], ""},
  {{:aot, [compiler: Nx.Defn.Evaluator]}, "_aot"},
  {[compiler: Nx.Vulkan.Compiler], "_compiled"},
  {[compiler: Nx.Vulkan.Compiler, garbage_collect: true], "_compiled_gc"}
]

train =
  for {compiler, suffix} <- compilers, {name, shape, step_fun, data_fun} <- models do
    data = data_fun.()

    step_fun =
      case compiler do
        {:aot, opts} ->
          Nx.Defn.default_options(opts)
          {params, x, y} = data
          Nx.Defn.compile(step_fun, [params, x, y], opts)

        opts ->
          Nx.Defn.default_options(opts)
          step_fun
      end

    cfg = %{warmup: warmup_steps, steady: not quick, busy_ms: busy_ms, steps: steps}
    r = B.train_checked(index, name <> suffix, step_fun, data, cfg)
    {name <> suffix, shape, r}
  end

Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)

IO.puts(
  "\ntraining steps (f32; *_compiled: Nx.Vulkan.Compiler, others Nx.Defn.Evaluator; " <>
    "*_aot: compiled ahead of time), " <>
    "#{warmup_steps}+ warm-up + #{steps} timed"
)

B.table(
  [
    "model",
    "median ms",
    "mean ms",
    "min ms",
    "host ms",
    "GPU ms",
    "loss first -> last",
    "warm-up steps",
    "device allocs (2nd half)",
    "device ops/step",
    "submits/step",
    "pool peak MiB",
    "fallbacks"
  ],
  for {name, shape, r} <- train do
    [
      "#{name} #{shape}",
      B.fmt(r.ms, 2),
      B.fmt(r.mean_ms, 2),
      B.fmt(r.min_ms, 2),
      B.fmt(r.host_ms, 2),
      B.fmt(r.gpu_ms, 2),
      "#{B.fmt(r.first_loss, 4)} -> #{B.fmt(r.last_loss, 4)}",
      Integer.to_string(r.warm_steps),
      "#{r.device_allocs} (#{r.late_allocs})",
      B.fmt(r.ops_per_step, 0),
      B.fmt(r.submits_per_step, 1),
      B.fmt(r.peak_mib, 1),
      if(r.fallbacks == %{}, do: "none", else: inspect(r.fallbacks))
    ]
  end
)

rows =
  [
    {"nx_vulkan_nx", "chain", "f32", "16", "us_per_op", chain_nx.e2e},
    {"nx_vulkan_nx", "chain_tensor", "f32", "16", "us_per_op", chain_nx_ones.e2e},
    {"nx_vulkan_nif", "chain", "f32", "16", "us_per_op", chain_nif.e2e},
    {"nx_vulkan_nx", "independent", "f32", "16", "us_per_op", indep_nx.e2e},
    {"nx_vulkan_nif", "independent", "f32", "16", "us_per_op", indep_nif.e2e},
    {"nx_vulkan_nx", "nx_frontend", "f32", "16", "us_per_op", indep_frontend.e2e},
    {"nx_vulkan_nx", "to_number", "f32", "1", "us", to_number},
    {"nx_vulkan_nx", "read_completed", "f32", "1", "us", read_completed},
    {"nx_vulkan_nx", "count", "f32", "#{count_side}x#{count_side}", "us", count}
  ] ++
    Enum.flat_map(train, fn {name, shape, r} ->
      [
        {"nx_vulkan_nx", name, "f32", shape, "ms", r.ms},
        {"nx_vulkan_nx", "pool_steady_device_allocs", "-", name, "count", r.device_allocs}
      ]
    end) ++
    [{"hw", "device", "-", String.replace(info.name, ",", ""), "count", 0}]

IO.puts("\nimpl,test,dtype,shape,metric,value")
csv = Enum.map(rows, fn {i, t, d, s, m, v} -> Enum.join([i, t, d, s, m, B.g6(v)], ",") end)
Enum.each(csv, &IO.puts/1)

if path = opts[:csv_out] do
  File.write!(path, Enum.join(["impl,test,dtype,shape,metric,value" | csv], "\n") <> "\n")
  IO.puts("wrote #{path}")
end
