# Load: many processes issuing mixed ops on one device, every result exact.
#
#   mix run bench/load.exs [processes] [ops]   (default 256, 10_000)
#
# Each process runs Nx.Vulkan.Workload.mixed/3 (test/elixir/support/
# workload.exs): a seeded random sequence of elementwise, strided,
# compare/select, convert, reduce and matmul ops on its own s32 vector,
# checked exactly against an Elixir model every 64 ops and at the end.
# Needs no Nx. Prints the ops queued, wall time, throughput and the
# device's counters; exits non-zero on any wrong element or error.
Code.require_file("../test/elixir/support/workload.exs", __DIR__)

alias Nx.Vulkan.{NIF, Workload}

{procs, ops} =
  case System.argv() do
    [p, o | _] -> {String.to_integer(p), String.to_integer(o)}
    [p] -> {String.to_integer(p), 10_000}
    [] -> {256, 10_000}
  end

dev = NIF.open_device(-1, %{})
info = NIF.device_info(NIF.default_device_index())
IO.puts("device: #{info.name}; #{procs} processes x #{ops} mixed ops")
t0 = System.monotonic_time(:microsecond)

results =
  1..procs
  |> Enum.map(fn seed ->
    Task.async(fn ->
      try do
        {:ok, Workload.mixed(dev, seed, ops)}
      rescue
        e -> {:error, seed, Exception.message(e)}
      end
    end)
  end)
  |> Task.await_many(:infinity)

NIF.synchronize(dev)
us = System.monotonic_time(:microsecond) - t0
failed = for {:error, seed, msg} <- results, do: {seed, msg}

queued =
  results
  |> Enum.map(fn
    {:ok, n} -> n
    _ -> 0
  end)
  |> Enum.sum()

s = NIF.device_stats(dev)

IO.puts("""
device ops queued: #{queued} (#{procs * ops} workload steps), wall #{Float.round(us / 1.0e6, 2)} s, \
#{round(queued / (us / 1.0e6))} ops/s
processes failed: #{length(failed)}
ops enqueued #{s.ops_enqueued}, completed #{s.ops_completed}, submits #{s.submits}, \
pool peak #{div(s.pool_bytes_peak, 1024)} KiB, status #{inspect(NIF.device_status(dev))}\
""")

for {seed, msg} <- Enum.take(failed, 5), do: IO.puts("  process #{seed}: #{msg}")
if failed != [], do: System.halt(1)
