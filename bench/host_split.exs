# How a training step's host time splits between Nx's Evaluator and this
# backend.
#
#   mix run bench/host_split.exs [--model mlp|cnn] [--steps N] [--reps N]
#
# 1. The step (bench/models.exs, compiled ahead of time with
#    Nx.Defn.Evaluator) on a backend whose every callback returns its
#    output tensor without doing anything: the Evaluator's own cost (walking
#    the expression, caching, dispatching), the floor no backend can go
#    below. Median and quartile of `--steps` (1000) calls.
# 2. The same step on Nx.Vulkan.Backend, as a training loop reading each
#    loss back: the time until the step function returned (the Evaluator
#    plus this backend enqueueing its ops).
# 3. The backend calls of one step, traced, then replayed `--reps` (300)
#    times in order with each call timed: per callback, the number of calls
#    and their summed time (each call's 25th percentile; the clock reads add
#    about 0.1 us per call).
{opts, rest, invalid} =
  OptionParser.parse(System.argv(), strict: [model: :string, steps: :integer, reps: :integer])

model = Keyword.get(opts, :model, "mlp")
steps = Keyword.get(opts, :steps, 1000)
reps = Keyword.get(opts, :reps, 300)

if rest != [] or invalid != [] or model not in ["mlp", "cnn"] or steps < 4 or reps < 4 do
  IO.puts(:stderr, "usage: mix run bench/host_split.exs [--model mlp|cnn] [--steps N] [--reps N]")
  System.halt(2)
end

Code.require_file("models.exs", __DIR__)

quartiles = fn list ->
  sorted = Enum.sort(list)
  n = length(sorted)
  {Enum.at(sorted, div(n, 4)), Enum.at(sorted, div(n, 2))}
end

us = fn ns -> :erlang.float_to_binary(ns / 1000, decimals: 1) end

Nx.default_backend(Nx.Vulkan.Backend)
{step, params, x, y} = NxBench.Steps.evaluator(model)

# 1. The Evaluator alone.
Nx.default_backend(NxBench.NullBackend)

nparams = NxBench.NullBackend.null(params)
{nx, ny} = {NxBench.NullBackend.null(x), NxBench.NullBackend.null(y)}

for _ <- 1..100, do: step.(nparams, nx, ny)

floor =
  for _ <- 1..steps do
    t0 = System.monotonic_time(:nanosecond)
    step.(nparams, nx, ny)
    System.monotonic_time(:nanosecond) - t0
  end

# 2. This backend, as a training loop.
Nx.default_backend(Nx.Vulkan.Backend)
p = NxBench.Steps.run(step, 50, params, x, y)
:ok = Nx.Vulkan.synchronize()

{host, p} =
  Enum.map_reduce(1..steps, p, fn _, p ->
    t0 = System.monotonic_time(:nanosecond)
    {p, loss} = step.(p, x, y)
    t1 = System.monotonic_time(:nanosecond)
    Nx.to_number(loss)
    {t1 - t0, p}
  end)

{f25, f50} = quartiles.(floor)
{h25, h50} = quartiles.(host)

IO.puts("#{model} step through Nx.Defn.Evaluator, host time in us (25th percentile / median)")
IO.puts("  Evaluator alone (null backend):             #{us.(f25)} / #{us.(f50)}")
IO.puts("  with Nx.Vulkan.Backend (until it returned): #{us.(h25)} / #{us.(h50)}")

# 3. The backend's calls of one step, replayed.
:ok = Nx.Vulkan.synchronize()
me = self()
:erlang.trace_pattern({Nx.Vulkan.Backend, :_, :_}, true, [])

collector =
  spawn(fn ->
    loop = fn loop, acc ->
      receive do
        {:trace, _, :call, {_m, fun, args}} -> loop.(loop, [{fun, args} | acc])
        {:get, from} -> send(from, {:calls, Enum.reverse(acc)})
      end
    end

    loop.(loop, [])
  end)

:erlang.trace(me, true, [:call, {:tracer, collector}])
{_p, loss} = step.(p, x, y)
:erlang.trace(me, false, [:call])
:erlang.trace_pattern({Nx.Vulkan.Backend, :_, :_}, false, [])
Nx.to_number(loss)
Process.sleep(100)
send(collector, {:get, self()})
calls = receive do: ({:calls, calls} -> calls)

per_call =
  for _ <- 1..reps do
    :ok = Nx.Vulkan.synchronize()

    for {fun, args} <- calls do
      t0 = System.monotonic_time(:nanosecond)
      apply(Nx.Vulkan.Backend, fun, args)
      System.monotonic_time(:nanosecond) - t0
    end
  end

p25 =
  per_call
  |> Enum.zip()
  |> Enum.map(fn times -> times |> Tuple.to_list() |> quartiles.() |> elem(0) end)

IO.puts(
  "  its #{length(calls)} backend calls replayed (25th percentile of each, summed): #{us.(Enum.sum(p25))}"
)

calls
|> Enum.zip(p25)
|> Enum.group_by(fn {{fun, _}, _} -> fun end, fn {_, t} -> t end)
|> Enum.sort_by(fn {_, ts} -> -Enum.sum(ts) end)
|> Enum.each(fn {fun, ts} ->
  IO.puts(
    "    #{String.pad_trailing(Atom.to_string(fun), 20)} #{String.pad_leading(Integer.to_string(length(ts)), 3)} calls " <>
      "#{String.pad_leading(us.(Enum.sum(ts)), 7)} us, #{us.(Enum.sum(ts) / length(ts))} each"
  )
end)
