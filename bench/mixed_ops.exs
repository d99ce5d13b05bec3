# Binary ops whose operands have two types, through Nx: one device op
# reading the narrower operand as it is, against the same op on that operand
# converted first (what such a call cost before the runtime's mixed-type
# kernels).
#
#   mix run bench/mixed_ops.exs [--side N] [--reps N]
#
# For each pair {result type, other type} and N x N operands (`--side`,
# default 8192; lower it on small devices), on the default device: `--reps`
# (default 20) calls of `Nx.add(t, u)` after 3 unmeasured ones, then as
# many of `Nx.add(t, Nx.as_type(u, t's type))`, each run between two reads of
# `Nx.Vulkan.stats/0` with a synchronize after every call. Prints the GPU
# time per call (`gpu_busy_ns`, from the batches' timestamps; 0 where the
# queue writes none, and for batches too small to be timed: a one-op batch
# under 2^16 elements of work), the device ops per call (the synchronize's
# marker not counted) and GB/s counted over the bytes the one op reads and
# writes (both operands in their own types, the result), so that the two
# rows compare their times. Then the same for
# `Nx.as_type/2` of an N x N tensor between pairs of types (GB/s over the
# bytes read and written).
{opts, rest, invalid} =
  OptionParser.parse(System.argv(), strict: [side: :integer, reps: :integer])

side = Keyword.get(opts, :side, 8192)
reps = Keyword.get(opts, :reps, 20)

if rest != [] or invalid != [] or side < 1 or reps < 1 do
  IO.puts(:stderr, "usage: mix run bench/mixed_ops.exs [--side N] [--reps N]")
  System.halt(2)
end

Nx.default_backend(Nx.Vulkan.Backend)
index = Nx.Vulkan.default_device_index()
info = Nx.Vulkan.NIF.device_info(index)

pairs = [
  {{:f, 32}, {:u, 8}},
  {{:f, 32}, {:s, 32}},
  {{:f, 64}, {:f, 32}},
  {{:s, 64}, {:s, 32}},
  {{:s, 32}, {:u, 8}},
  {{:u, 64}, {:u, 16}}
]

name = fn {k, b} -> "#{k}#{b}" end

# The columns after a row's label: GPU time and device ops per call, GB/s.
header = fn label ->
  IO.puts(
    label <>
      String.pad_leading("GPU us/call", 12) <>
      String.pad_leading("ops/call", 10) <> String.pad_leading("GB/s", 10)
  )
end

# Measures f (reps calls after 3 unmeasured ones, a synchronize after each)
# and prints label's row, GB/s over bytes per call.
row = fn label, bytes, f ->
  for _ <- 1..3, do: f.() |> Nx.backend_deallocate()
  :ok = Nx.Vulkan.synchronize()
  s0 = Nx.Vulkan.stats()

  for _ <- 1..reps do
    r = f.()
    :ok = Nx.Vulkan.synchronize()
    Nx.backend_deallocate(r)
  end

  s1 = Nx.Vulkan.stats()
  us = (s1.gpu_busy_ns - s0.gpu_busy_ns) / reps / 1000
  # (Each synchronize queues a marker, counted among the ops enqueued.)
  ops = (s1.ops_enqueued - s0.ops_enqueued) / reps - 1
  gbs = if us > 0, do: bytes / (us * 1000), else: 0.0

  IO.puts(
    label <>
      String.pad_leading(:erlang.float_to_binary(us, decimals: 1), 12) <>
      String.pad_leading(:erlang.float_to_binary(ops, decimals: 1), 10) <>
      String.pad_leading(:erlang.float_to_binary(gbs, decimals: 0), 10)
  )
end

IO.puts("mixed-type Nx.add on #{info.name}, #{side} x #{side}, #{reps} calls each")
header.(String.pad_trailing("pair", 12) <> String.pad_trailing("way", 14))

for {t, u} <- pairs do
  x = Nx.iota({side, side}, type: t) |> Nx.remainder(7)
  y = Nx.iota({side, side}, type: u) |> Nx.remainder(5)
  bytes = side * side * (2 * elem(t, 1) + elem(u, 1)) / 8
  pair = String.pad_trailing("#{name.(t)}+#{name.(u)}", 12)

  row.(pair <> String.pad_trailing("one op", 14), bytes, fn -> Nx.add(x, y) end)

  row.(pair <> String.pad_trailing("converted", 14), bytes, fn ->
    Nx.add(x, Nx.as_type(y, t))
  end)

  Nx.backend_deallocate(x)
  Nx.backend_deallocate(y)
end

conversions = [
  {{:u, 8}, {:f, 16}},
  {{:u, 8}, {:bf, 16}},
  {{:u, 8}, {:f, 32}},
  {{:u, 8}, {:f, 64}},
  {{:f, 16}, {:f, 32}},
  {{:bf, 16}, {:f, 32}},
  {{:s, 32}, {:s, 64}},
  {{:f, 32}, {:f, 64}},
  {{:f, 32}, {:f, 16}},
  {{:f, 32}, {:bf, 16}}
]

IO.puts("\nNx.as_type on #{info.name}, #{side} x #{side}, #{reps} calls each")
header.(String.pad_trailing("from -> to", 16))

for {from, to} <- conversions do
  x = Nx.iota({side, side}, type: from) |> Nx.remainder(7)
  bytes = side * side * (elem(from, 1) + elem(to, 1)) / 8
  label = String.pad_trailing("#{name.(from)} -> #{name.(to)}", 16)
  row.(label, bytes, fn -> Nx.as_type(x, to) end)
  Nx.backend_deallocate(x)
end
