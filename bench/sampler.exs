# What a sampler's step costs through Nx on the default device: random
# numbers (Nx.Random, whose threefry runs two nested `while` loops) and a
# Hamiltonian Monte Carlo step written in plain defn and evaluated by
# Nx.Defn.Evaluator, with Nx.Vulkan.Backend as the default backend.
#
#   mix run bench/sampler.exs [--reps N] [--dim N] [--leapfrog N]
#                             [--csv-out FILE]
#
# Cases (f32), each after 3 unmeasured calls:
#
#   * random_normal: `Nx.Random.normal(key, shape: {dim})` (default dim
#     1024), each call followed by `Nx.Vulkan.synchronize/0`;
#   * hmc_step: one HMC step on a standard normal target of dim dimensions
#     (default 64): momentum from Nx.Random.normal, --leapfrog (default
#     10) leapfrog steps in a `while` loop, the Metropolis test with
#     Nx.Random.uniform, and the accept flag read with Nx.to_number/1 (a
#     sampler's host needs it; each step feeds its position and key to the
#     next), compiled ahead of time with Nx.Defn.Evaluator;
#   * random_normal_compiled, hmc_step_compiled: the same through
#     Nx.Vulkan.Compiler (traced once; later calls replay the device calls
#     in one NIF call, the loops' conditions having been decided on the
#     host);
#   * random_normal_compiled_calls, hmc_step_compiled_calls: the same with
#     `compiler_native_replay: false` (the plan replayed call by call from
#     Elixir).
#
# Figures per case: `e2e us` (median over --reps, default 50), `host us`
# (median time until the call returned, before the wait for its result:
# where it exceeds the GPU's time the case is bound by the host), `GPU us`
# (the GPU time of its batches per call, from their timestamps), and per
# call the device ops, the submissions and the downloads (the reads back
# that each `while` condition made before such conditions stayed on the
# host) from Nx.Vulkan.stats/0. `--csv-out FILE` writes them in the shared
# schema (`impl,test,dtype,shape,metric,value`; impl `nx_vulkan_nx`).
# bench/sampler_peers.py runs the same cases on PyTorch and JAX.
Code.require_file("hmc.exs", __DIR__)

{opts, _, invalid} =
  OptionParser.parse(System.argv(),
    strict: [reps: :integer, dim: :integer, leapfrog: :integer, csv_out: :string]
  )

if invalid != [], do: raise(ArgumentError, "unknown options #{inspect(invalid)}")
reps = opts[:reps] || 50
dim = opts[:dim] || 64
leapfrog = opts[:leapfrog] || 10
normal_dim = if opts[:dim], do: dim, else: 1024
if reps < 1 or dim < 1 or leapfrog < 1, do: raise(ArgumentError, "sizes must be positive")

Nx.default_backend(Nx.Vulkan.Backend)
index = Nx.Vulkan.default_device_index()
info = Nx.Vulkan.NIF.device_info(index)
IO.puts("device: #{info.name} (#{info.driver_name} #{info.driver_info})")
IO.puts("reps #{reps}, hmc dim #{dim}, leapfrog #{leapfrog}, normal dim #{normal_dim}")

median = fn list ->
  sorted = Enum.sort(list)
  n = length(sorted)

  if rem(n, 2) == 1,
    do: Enum.at(sorted, div(n, 2)),
    else: (Enum.at(sorted, div(n, 2) - 1) + Enum.at(sorted, div(n, 2))) / 2
end

# {median us, median host us, GPU us, device ops, submissions, downloads}
# per call of reps calls of step (state -> state), each timed until
# done(state) returned (host us: until step returned; GPU us: the GPU time
# of the batches, from their timestamps, 0 where the queue writes none).
measure = fn step, state, done ->
  state = Enum.reduce(1..3, state, fn _, s -> step.(s) end)
  done.(state)
  :ok = Nx.Vulkan.synchronize(index)
  s0 = Nx.Vulkan.stats(index)

  {times, _} =
    Enum.map_reduce(1..reps, state, fn _, s ->
      t0 = System.monotonic_time(:nanosecond)
      s = step.(s)
      t1 = System.monotonic_time(:nanosecond)
      done.(s)
      {{(System.monotonic_time(:nanosecond) - t0) / 1000, (t1 - t0) / 1000}, s}
    end)

  s1 = Nx.Vulkan.stats(index)
  # The GPU time once the last batch has retired (the synchronize's own
  # marker is not a device op of the calls).
  :ok = Nx.Vulkan.synchronize(index)
  gpu_ns = Nx.Vulkan.stats(index).gpu_busy_ns - s0.gpu_busy_ns
  per = fn a, b -> (a - b) / reps end

  {median.(Enum.map(times, &elem(&1, 0))), median.(Enum.map(times, &elem(&1, 1))),
   gpu_ns / reps / 1000, per.(s1.ops_enqueued, s0.ops_enqueued), per.(s1.submits, s0.submits),
   per.(s1.download_wait.count, s0.download_wait.count)}
end

key = Nx.Random.key(42)

normal_step = fn k ->
  {_x, k} = Nx.Random.normal(k, shape: {normal_dim})
  k
end

normal_done = fn _k -> :ok = Nx.Vulkan.synchronize(index) end

hmc =
  Nx.Defn.compile(
    &NxBench.Sampler.hmc_step/4,
    [Nx.broadcast(0.0, {dim}), key, 0.1, [steps: leapfrog]],
    compiler: Nx.Defn.Evaluator
  )

hmc_step = fn {q, k, _accept} -> hmc.(q, k, 0.1) end

# The same through Nx.Vulkan.Compiler: traced once, then its device calls
# replayed (the loops' conditions are decided on the host).
normal_jit =
  Nx.Defn.jit(fn k -> Nx.Random.normal(k, shape: {normal_dim}) end,
    compiler: Nx.Vulkan.Compiler
  )

normal_compiled = fn k ->
  {_x, k} = normal_jit.(k)
  k
end

hmc_jit =
  Nx.Defn.jit(&NxBench.Sampler.hmc_step(&1, &2, &3, steps: leapfrog),
    compiler: Nx.Vulkan.Compiler
  )

hmc_compiled = fn {q, k, _accept} -> hmc_jit.(q, k, 0.1) end
hmc_done = fn {_q, _k, accept} -> Nx.to_number(accept) end
hmc_state = {Nx.broadcast(0.0, {dim}), key, nil}

rows = [
  {"random_normal", "#{normal_dim}", measure.(normal_step, key, normal_done)},
  {"random_normal_compiled", "#{normal_dim}", measure.(normal_compiled, key, normal_done)},
  {"hmc_step", "#{dim}x#{leapfrog}", measure.(hmc_step, hmc_state, hmc_done)},
  {"hmc_step_compiled", "#{dim}x#{leapfrog}", measure.(hmc_compiled, hmc_state, hmc_done)}
]

# The compiled cases again with their plans replayed call by call from
# Elixir (compiler_native_replay: false) instead of in one NIF call.
Application.put_env(:nx_vulkan, :compiler_native_replay, false)
Nx.Vulkan.Compiler.clear_cache()

rows =
  rows ++
    [
      {"random_normal_compiled_calls", "#{normal_dim}",
       measure.(normal_compiled, key, normal_done)},
      {"hmc_step_compiled_calls", "#{dim}x#{leapfrog}",
       measure.(hmc_compiled, hmc_state, hmc_done)}
    ]

Application.delete_env(:nx_vulkan, :compiler_native_replay)
Nx.Vulkan.Compiler.clear_cache()

IO.puts("\n| case | shape | e2e us | host us | GPU us | device ops | submissions | downloads |")
IO.puts("| --- | --- | --- | --- | --- | --- | --- | --- |")

for {test, shape, {us, host, gpu, ops, submits, dl}} <- rows do
  IO.puts(
    "| #{test} | #{shape} | #{Float.round(us, 1)} | #{Float.round(host, 1)} | " <>
      "#{Float.round(gpu, 1)} | #{Float.round(ops, 1)} | " <>
      "#{Float.round(submits, 1)} | #{Float.round(dl, 1)} |"
  )
end

if path = opts[:csv_out] do
  lines =
    for {test, shape, {us, host, gpu, ops, submits, dl}} <- rows,
        {metric, value} <- [
          {"e2e_us", us},
          {"host_us", host},
          {"gpu_us", gpu},
          {"device_ops", ops},
          {"submits", submits},
          {"downloads", dl}
        ] do
      "nx_vulkan_nx,#{test},f32,#{shape},#{metric},#{value}"
    end

  File.write!(path, Enum.join(["impl,test,dtype,shape,metric,value" | lines], "\n") <> "\n")
end
