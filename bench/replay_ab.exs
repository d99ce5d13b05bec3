# Nx.Vulkan.Compiler's two replays of one plan, alternated in one process:
# in one NIF call (Nx.Vulkan.NIF.replay/2) and call by call from Elixir
# (`compiler_native_replay: false`), on the HMC step of bench/hmc.exs
# (64 dimensions, 10 leapfrog steps) that feeds its position and key to
# the next step and reads its accept flag.
#
#   mix run bench/replay_ab.exs [--rounds N] [--steps N]
#
# Two jitted functions of the same step make one plan each way; then
# --rounds (default 4) rounds each run --steps (default 100) steps of one,
# then of the other. Per round and replay: the median and fastest host µs
# (until the step returned) and end to end µs (until the flag was read).
# The first round warms up; alternating keeps the host's drift (its pace
# changes as a process ages) out of the comparison.
Code.require_file("hmc.exs", __DIR__)

{opts, rest, invalid} =
  OptionParser.parse(System.argv(), strict: [rounds: :integer, steps: :integer])

rounds = Keyword.get(opts, :rounds, 4)
steps = Keyword.get(opts, :steps, 100)

if rest != [] or invalid != [] or rounds < 1 or steps < 1 do
  IO.puts(:stderr, "usage: mix run bench/replay_ab.exs [--rounds N] [--steps N]")
  System.halt(2)
end

Nx.default_backend(Nx.Vulkan.Backend)
q0 = Nx.iota({64}, type: :f32) |> Nx.divide(64)
key0 = Nx.Random.key(42)

# A step whose plan is made with compiler_native_replay set to native
# (read when the plan is made), and its state after 5 steps.
make = fn native, fun ->
  Application.put_env(:nx_vulkan, :compiler_native_replay, native)
  f = Nx.Defn.jit(fun, compiler: Nx.Vulkan.Compiler)

  step = fn {q, k} ->
    {q2, k2, accept} = f.(q, k)
    {{q2, k2}, accept}
  end

  state =
    Enum.reduce(1..5, {q0, key0}, fn _, s ->
      {s, accept} = step.(s)
      Nx.to_number(accept)
      s
    end)

  {step, state}
end

# Two closures: two cache keys, one plan each.
{native_step, native_state} = make.(true, &NxBench.Sampler.hmc_step(&1, &2, 0.1, steps: 10))

{calls_step, calls_state} =
  make.(false, fn q, k -> NxBench.Sampler.hmc_step(q, k, 0.1, steps: 10) end)

Application.delete_env(:nx_vulkan, :compiler_native_replay)

now = fn -> System.monotonic_time(:nanosecond) end
median = fn list -> Enum.at(Enum.sort(list), div(length(list), 2)) / 1000 end

round = fn step, state ->
  :ok = Nx.Vulkan.synchronize()

  {state, host, e2e} =
    Enum.reduce(1..steps, {state, [], []}, fn _, {s, hs, es} ->
      t0 = now.()
      {s, accept} = step.(s)
      t1 = now.()
      Nx.to_number(accept)
      {s, [t1 - t0 | hs], [now.() - t0 | es]}
    end)

  line =
    "host median #{median.(host)} fastest #{Enum.min(host) / 1000}, " <>
      "e2e median #{median.(e2e)} fastest #{Enum.min(e2e) / 1000}"

  {state, line}
end

Enum.reduce(1..rounds, {native_state, calls_state}, fn r, {ns, cs} ->
  {ns, native_line} = round.(native_step, ns)
  {cs, calls_line} = round.(calls_step, cs)
  IO.puts("round #{r} one call:     #{native_line}")
  IO.puts("round #{r} call by call: #{calls_line}")
  {ns, cs}
end)
