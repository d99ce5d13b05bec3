# Elementwise chains with the device option defer_elementwise off and on.
#
#   mix run bench/defer_chain.exs [--n N] [--reps N]
#
# For each setting the default device is reopened, then:
#   * large: x * 1.0001 + 0.5, times x, minus 0.25 over an N x N f32 tensor
#     (default 4096), read by a sum: wall and GPU time per chain (GPU time
#     from the batch timestamps: 0 on devices without them), device ops;
#   * tiny: 1000 dependent adds of 1.0 to a 16-element f32 tensor, read at
#     the end: µs per op.
# Prints one line per setting and the ratios on over off.
{opts, rest, invalid} = OptionParser.parse(System.argv(), strict: [n: :integer, reps: :integer])
n = Keyword.get(opts, :n, 4096)
reps = Keyword.get(opts, :reps, 20)

if rest != [] or invalid != [] or n < 1 or reps < 1 do
  IO.puts(:stderr, "usage: mix run bench/defer_chain.exs [--n N] [--reps N]")
  System.halt(2)
end

measure = fn defer ->
  Nx.Vulkan.reopen(nil, %{defer_elementwise: defer})
  x = Nx.iota({n, n}, type: :f32, backend: Nx.Vulkan.Backend) |> Nx.divide(n * n)
  chain = fn -> x |> Nx.multiply(1.0001) |> Nx.add(0.5) |> Nx.multiply(x) |> Nx.subtract(0.25) end
  large = fn -> chain.() |> Nx.sum() |> Nx.to_number() end
  for _ <- 1..3, do: large.()
  s0 = Nx.Vulkan.stats()
  t0 = System.monotonic_time(:nanosecond)
  for _ <- 1..reps, do: large.()
  t1 = System.monotonic_time(:nanosecond)
  s1 = Nx.Vulkan.stats()

  t = Nx.broadcast(Nx.tensor(0.0, type: :f32, backend: Nx.Vulkan.Backend), {16})
  tiny = fn -> Enum.reduce(1..1000, t, fn _, acc -> Nx.add(acc, 1.0) end) |> Nx.to_flat_list() end
  tiny.()
  t2 = System.monotonic_time(:nanosecond)
  for _ <- 1..reps, do: tiny.()
  t3 = System.monotonic_time(:nanosecond)

  %{
    wall_us: (t1 - t0) / reps / 1000,
    gpu_us: (s1.gpu_busy_ns - s0.gpu_busy_ns) / reps / 1000,
    ops: (s1.ops_enqueued - s0.ops_enqueued) / reps,
    tiny_us_per_op: (t3 - t2) / reps / 1000 / 1000
  }
end

off = measure.(false)
on = measure.(true)
info = Nx.Vulkan.NIF.device_info(Nx.Vulkan.default_device_index())

IO.puts(
  "defer_elementwise on #{info.name} (#{info.driver_name} #{info.driver_info}): #{n} x #{n} f32 chain of 4 ops read by a sum, " <>
    "#{reps} reps; 1000 dependent adds of 16 elements"
)

for {name, r} <- [{"off", off}, {"on", on}] do
  IO.puts(
    "#{String.pad_trailing(name, 4)} large: wall #{Float.round(r.wall_us, 1)} us, " <>
      "GPU #{Float.round(r.gpu_us, 1)} us, #{r.ops} device ops; " <>
      "tiny: #{Float.round(r.tiny_us_per_op, 3)} us/op"
  )
end

ratio = fn a, b -> if b > 0, do: Float.round(a / b, 3), else: "-" end

IO.puts(
  "on/off large: wall #{ratio.(on.wall_us, off.wall_us)}, GPU #{ratio.(on.gpu_us, off.gpu_us)}; " <>
    "tiny #{ratio.(on.tiny_us_per_op, off.tiny_us_per_op)}"
)
