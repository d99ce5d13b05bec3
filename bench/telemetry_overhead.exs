# What telemetry costs on the per-op path, from Elixir.
#
#   mix run bench/telemetry_overhead.exs [ops] [rounds]   (default 20_000, 5)
#
# On the default device, alternating in one VM: with no handler attached,
# then with a counting handler on every event of Nx.Vulkan.Telemetry (C
# batch records on, download spans on). Each round times
#   * chain: a dependent chain of `ops` tiny adds (`Nx.add(x, one)`, 16
#     f32) until the result is on the host, µs per op;
#   * to_number: `Nx.to_number(Nx.add(y, 1))` on one f32, 1000 round trips,
#     median µs.
# Prints each round and the ratio with/without handlers of the medians.
# The C per-op clock of the op_latency histogram is on in both: its cost is
# what nxv_bench's latency suite reports as "batched / untimed".
unless Code.ensure_loaded?(Nx) and Code.ensure_loaded?(:telemetry) do
  raise "bench/telemetry_overhead.exs needs Nx and :telemetry (NX_PATH or Hex)"
end

{ops, rounds} =
  case System.argv() do
    [n, r | _] -> {String.to_integer(n), String.to_integer(r)}
    [n] -> {String.to_integer(n), 5}
    [] -> {20_000, 5}
  end

defmodule TelemetryOverhead do
  def count(_event, _m, _meta, counter), do: :counters.add(counter, 1, 1)

  def chain(ops) do
    one = Nx.broadcast(Nx.tensor(1.0, backend: Nx.Vulkan.Backend), {16})
    x0 = Nx.broadcast(Nx.tensor(0.0, backend: Nx.Vulkan.Backend), {16})
    Nx.Vulkan.synchronize()
    t0 = System.monotonic_time(:nanosecond)
    x = Enum.reduce(1..ops, x0, fn _, acc -> Nx.add(acc, one) end)
    v = x |> Nx.slice([0], [1]) |> Nx.to_flat_list() |> hd()
    t1 = System.monotonic_time(:nanosecond)
    if v != ops * 1.0, do: raise("chain result #{v}, expected #{ops}")
    (t1 - t0) / ops / 1000
  end

  def to_number(n) do
    y = Nx.tensor(2.0, backend: Nx.Vulkan.Backend)

    times =
      for _ <- 1..n do
        t0 = System.monotonic_time(:nanosecond)
        3.0 = Nx.to_number(Nx.add(y, 1))
        System.monotonic_time(:nanosecond) - t0
      end

    Enum.at(Enum.sort(times), div(n, 2)) / 1000
  end

  def median(list), do: Enum.at(Enum.sort(list), div(length(list), 2))
end

interval = Application.get_env(:nx_vulkan, :telemetry_interval_ms, 500)
counter = :counters.new(1, [])
# Warm-up: pipelines, pool, the poller has seen the device.
TelemetryOverhead.chain(1000)
TelemetryOverhead.to_number(100)

results =
  for r <- 1..rounds, mode <- [:off, :on] do
    id = {:telemetry_overhead, r}

    if mode == :on do
      :telemetry.attach_many(
        id,
        Nx.Vulkan.Telemetry.events(),
        &TelemetryOverhead.count/4,
        counter
      )
    end

    # Let the poller see the change (recording, download spans).
    Process.sleep(interval + 100)
    chain = TelemetryOverhead.chain(ops)
    number = TelemetryOverhead.to_number(1000)
    if mode == :on, do: :telemetry.detach(id)

    IO.puts(
      "round #{r} handlers #{mode}: chain #{Float.round(chain, 3)} us/op, to_number #{Float.round(number, 2)} us"
    )

    {mode, chain, number}
  end

Process.sleep(interval + 100)

med = fn mode, i ->
  results
  |> Enum.filter(&(elem(&1, 0) == mode))
  |> Enum.map(&elem(&1, i))
  |> TelemetryOverhead.median()
end

IO.puts(
  "median: chain #{Float.round(med.(:off, 1), 3)} -> #{Float.round(med.(:on, 1), 3)} us/op " <>
    "(#{Float.round(med.(:on, 1) / med.(:off, 1), 3)}x), to_number #{Float.round(med.(:off, 2), 2)} -> " <>
    "#{Float.round(med.(:on, 2), 2)} us (#{Float.round(med.(:on, 2) / med.(:off, 2), 3)}x); " <>
    "#{:counters.get(counter, 1)} events handled"
)
