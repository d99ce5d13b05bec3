# Soak: one loop of small training-like steps for millions of device ops,
# watching what must stay flat.
#
#   mix run bench/soak.exs [ops] [samples]   (default 10_000_000, 10)
#
# Each step (Nx.Vulkan.Workload.step/2, test/elixir/support/workload.exs)
# is 10 device ops: a product, elementwise ops, a strided read, an upload,
# a reduction and a scalar download, whose value is checked. Needs no Nx.
# After a warm-up of 10% of the steps (the 64 MiB staging ring takes
# 65,536 steps to wrap; until it has, its pages are touched for the first
# time and count in the RSS), prints a row per sample: ops so far,
# ops/s since the last row, process RSS, BEAM memory, pool bytes reserved
# and in use, live pool buffers, staging bytes, pipelines. Then the
# growth of each figure between the first and the last row. Each sample
# is taken after a garbage collection and waiting for the queued work
# (pool figures settled). Descriptors:
# the runtime allocates none (buffer device addresses in push constants).
Code.require_file("../test/elixir/support/workload.exs", __DIR__)

alias Nx.Vulkan.{NIF, Workload}

{ops, samples} =
  case System.argv() do
    [o, s | _] -> {String.to_integer(o), String.to_integer(s)}
    [o] -> {String.to_integer(o), 10}
    [] -> {10_000_000, 10}
  end

dev = NIF.open_device(-1, %{})
info = NIF.device_info(NIF.default_device_index())
state = Workload.init(dev)
steps = div(ops, 10)
warmup = max(div(steps, 10), 1)
per_sample = max(div(steps - warmup, samples), 1)
IO.puts("device: #{info.name}; #{steps} steps of 10 ops, warm-up #{warmup} steps")

run = fn n ->
  Enum.each(1..n, fn _ ->
    v = Workload.step(dev, state)
    if v != state.expected, do: raise("step returned #{v}, expected #{state.expected}")
  end)
end

run.(warmup)

header =
  "     ops  ops/s   rss_MiB  beam_MiB  pool_res_MiB  pool_use_KiB  live_bufs  staging_KiB  pipelines"

IO.puts(header)
mb = fn b -> Float.round(b / 1_048_576, 1) end

row = fn done, rate, s ->
  :io.format("~8w ~6w ~9w ~9w ~13w ~13w ~10w ~12w ~10w~n", [
    done,
    rate,
    Float.round(s.rss_kb / 1024, 1),
    mb.(s.beam_bytes),
    mb.(s.pool_reserved),
    div(s.pool_in_use, 1024),
    s.live_buffers,
    div(s.staging, 1024),
    s.pipelines
  ])
end

sample = fn ->
  # Dead tensor handles in this process's heap hold buffers until it
  # collects garbage; settled figures need both.
  :erlang.garbage_collect()
  NIF.synchronize(dev)
  Workload.sample(dev)
end

first = sample.()
row.(warmup * 10, 0, first)

{last, _} =
  Enum.reduce(1..samples, {first, warmup * 10}, fn _, {_, done} ->
    t0 = System.monotonic_time(:microsecond)
    run.(per_sample)
    us = System.monotonic_time(:microsecond) - t0
    s = sample.()
    done = done + per_sample * 10
    row.(done, round(per_sample * 10 / (us / 1.0e6)), s)
    {s, done}
  end)

IO.puts(
  "growth first -> last row: rss #{last.rss_kb - first.rss_kb} kB, " <>
    "beam #{last.beam_bytes - first.beam_bytes} B, " <>
    "pool reserved #{last.pool_reserved - first.pool_reserved} B, " <>
    "live buffers #{last.live_buffers - first.live_buffers}, " <>
    "pipelines #{last.pipelines - first.pipelines}; status #{inspect(NIF.device_status(dev))}"
)
