# GPU time per device op of a training step through Nx.Defn.Evaluator.
#
#   mix run bench/step_profile.exs [--model mlp|cnn] [--warmup N] [--busy-ms MS]
#
# Reopens the default device with one op per batch (`max_batch_nodes: 1`),
# so that the `[:nx_vulkan, :submit]` telemetry event of each batch gives
# the GPU time of one device op (its batch's timestamps included). The step
# (bench/models.exs, compiled ahead of time with Nx.Defn.Evaluator) runs
# `--warmup` times (default 20: the pool fills), the GPU multiplies 1024 x
# 1024 matrices for `--busy-ms` (default 500: a GPU that idled between
# tiny batches lowers its clocks, which would time ops 3x longer; CPU
# devices skip it), then the step runs once more with its NIF calls
# traced. Prints the batches of that last step in order with their GPU
# time, the longest ones, and the NIF calls of the step in order (an op
# such as a split reduction or product takes two batches; a reinterpret
# takes none).
{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [model: :string, warmup: :integer, busy_ms: :integer]
  )

model = Keyword.get(opts, :model, "mlp")
warmup = Keyword.get(opts, :warmup, 20)
busy_ms = Keyword.get(opts, :busy_ms, 500)

if rest != [] or invalid != [] or model not in ["mlp", "cnn"] or warmup < 1 or busy_ms < 0 do
  IO.puts(
    :stderr,
    "usage: mix run bench/step_profile.exs [--model mlp|cnn] [--warmup N] [--busy-ms MS]"
  )

  System.halt(2)
end

Code.require_file("models.exs", __DIR__)

Nx.Vulkan.reopen(nil, %{max_batch_nodes: 1})
Nx.default_backend(Nx.Vulkan.Backend)

{step, params, x, y} = NxBench.Steps.evaluator(model)
run = fn n, p -> NxBench.Steps.run(step, n, p, x, y) end

params = run.(1, params)
table = :ets.new(:step_profile, [:public, :ordered_set])

:telemetry.attach(
  "step-profile",
  [:nx_vulkan, :submit],
  &NxBench.Steps.record_submit/4,
  table
)

# The handler takes effect within one telemetry interval.
interval = Application.get_env(:nx_vulkan, :telemetry_interval_ms, 500)
Process.sleep(2 * interval)
params = run.(warmup, params)

# A GPU that idled lowers its clocks, and one op per batch alone does not
# raise them.
index = Nx.Vulkan.default_device_index()
info = Nx.Vulkan.NIF.device_info(index)
:ok = NxBench.Steps.busy_gpu(index, busy_ms)

submits0 = Nx.Vulkan.stats().submits

tracer =
  spawn(fn ->
    collect = fn collect, acc ->
      receive do
        {:trace, _, :call, {_m, f, args}} ->
          summary = Enum.map(args, fn a -> if is_list(a) or is_atom(a), do: a, else: :_ end)
          collect.(collect, [{f, summary} | acc])

        {:done, pid} ->
          send(pid, {:calls, Enum.reverse(acc)})
      end
    end

    collect.(collect, [])
  end)

:erlang.trace(self(), true, [:call, {:tracer, tracer}])
:erlang.trace_pattern({Nx.Vulkan.NIF, :_, :_}, true, [:local])
{_params, loss} = step.(params, x, y)
:erlang.trace(self(), false, [:call])
Nx.to_number(loss)
Nx.Vulkan.synchronize()
step_batches = Nx.Vulkan.stats().submits - submits0
send(tracer, {:done, self()})
calls = receive do: ({:calls, c} -> c)
Process.sleep(3 * interval)
:telemetry.detach("step-profile")

batches = :ets.tab2list(table) |> Enum.map(fn {_, ops, ns} -> {ops, ns / 1000} end)
last = Enum.take(batches, -step_batches)
total = last |> Enum.map(&elem(&1, 1)) |> Enum.sum()
indexed = Enum.with_index(last)

IO.puts(
  "#{model} step, Nx.Defn.Evaluator, one op per batch, on #{info.name} (#{info.driver_name} #{info.driver_info})"
)

IO.puts("batches of the step #{step_batches}, its loss read and a synchronize included")
IO.puts("GPU time of the last step: #{Float.round(total, 1)} us\n")
IO.puts("batch  ops  GPU us")

Enum.each(indexed, fn {{ops, us}, i} ->
  IO.puts(
    "#{String.pad_leading("#{i}", 5)}  #{String.pad_leading("#{ops}", 3)}  " <>
      :erlang.float_to_binary(us, decimals: 2)
  )
end)

IO.puts("\nlongest batches:")

indexed
|> Enum.sort_by(fn {{_, us}, _} -> -us end)
|> Enum.take(10)
|> Enum.each(fn {{_, us}, i} ->
  IO.puts("  batch #{i}: #{:erlang.float_to_binary(us, decimals: 2)} us")
end)

IO.puts("\nNIF calls of the step (#{length(calls)}):")

calls
|> Enum.with_index()
|> Enum.each(fn {c, i} ->
  IO.puts("#{String.pad_leading("#{i}", 5)}  #{inspect(c, limit: 12)}")
end)
