# Host overhead per op from Elixir: an asynchronous chain of tiny ops.
#
#   mix run bench/host_overhead.exs [ops]        (default 100_000)
#
# Measures, on the default device, the time per op of a dependent chain of
# tiny adds (16 f32 elements):
#   * through the NIF directly (the floor: decode, enqueue, resource);
#   * through Nx with Nx.Vulkan.Backend (when Nx is available), i.e. what a
#     user of `Nx.add/2` pays;
# each as "enqueue" (until the last op returned) and "e2e" (until the final
# result is on the host). One submit per op is the reference, measured in
# the same run on a second device context opened with max_batch_nodes: 1.
# The Nx row runs on the default device context, opened with the same ring.
alias Nx.Vulkan.NIF

ops =
  case System.argv() do
    [n | _] -> String.to_integer(n)
    [] -> 100_000
  end

f32 = fn list -> for x <- list, into: <<>>, do: <<x::float-32-native>> end

nif_chain = fn dev, n ->
  one = NIF.upload(dev, :f32, f32.(List.duplicate(1.0, 16)))
  x0 = NIF.upload(dev, :f32, f32.(List.duplicate(0.0, 16)))
  :ok = NIF.synchronize(dev)
  t0 = System.monotonic_time(:nanosecond)

  x = Enum.reduce(1..n, x0, fn _, acc -> NIF.binary(:add, [16], acc, 0, nil, one, 0, nil) end)

  t1 = System.monotonic_time(:nanosecond)
  <<v::float-32-native, _::binary>> = NIF.download(x, 0, 16)
  t2 = System.monotonic_time(:nanosecond)
  if v != n * 1.0, do: raise("chain result #{v}, expected #{n}")
  {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
end

nx_chain = fn backend, n ->
  one = Nx.tensor(List.duplicate(1.0, 16), type: :f32, backend: backend)
  x0 = Nx.tensor(List.duplicate(0.0, 16), type: :f32, backend: backend)
  Nx.Vulkan.synchronize()
  t0 = System.monotonic_time(:nanosecond)
  x = Enum.reduce(1..n, x0, fn _, acc -> Nx.add(acc, one) end)
  t1 = System.monotonic_time(:nanosecond)
  v = x |> Nx.to_flat_list() |> hd()
  t2 = System.monotonic_time(:nanosecond)
  if v != n * 1.0, do: raise("chain result #{v}, expected #{n}")
  {(t1 - t0) / n / 1000, (t2 - t0) / n / 1000}
end

# A ring that holds the whole chain: producers never wait for the device,
# so "enqueue" is the host cost alone (on lavapipe the "GPU" is these same
# two cores, so it still competes with the chain for CPU time).
index = Nx.Vulkan.default_device_index()
ring = max(1 |> Bitwise.bsl(ceil(:math.log2(ops + 2))), 4096)
# The default context (used by Nx.Vulkan.Backend) gets the same ring.
Application.put_env(:nx_vulkan, :device_options, %{ring_capacity: ring})
dev = NIF.open_device(index, %{ring_capacity: ring, disable_disk_cache: true})
ref = NIF.open_device(index, %{max_batch_nodes: 1, disable_disk_cache: true})
info = NIF.device_info(Nx.Vulkan.default_device_index())
IO.puts("device: #{info.name} (#{info.driver_name} #{info.driver_info}), ops: #{ops}")
IO.puts("schedulers: #{System.schedulers_online()}, OTP #{System.otp_release()}")

# Warm up pipelines and the pool.
nif_chain.(dev, 1000)
nif_chain.(ref, 100)

rows = [
  {"NIF chain, batched", nif_chain.(dev, ops)},
  {"NIF chain, 1 submit/op", nif_chain.(ref, div(ops, 10))}
]

rows =
  if Code.ensure_loaded?(Nx) and Code.ensure_loaded?(Nx.Vulkan.Backend) do
    nx_chain.(Nx.Vulkan.Backend, 1000)
    rows ++ [{"Nx.add chain, Nx.Vulkan.Backend", nx_chain.(Nx.Vulkan.Backend, ops)}]
  else
    IO.puts("(Nx not available: the Nx-level row is skipped)")
    rows
  end

IO.puts(String.pad_trailing("test", 36) <> "  enqueue us/op      e2e us/op")

for {name, {enq, e2e}} <- rows do
  IO.puts(
    String.pad_trailing(name, 36) <>
      String.pad_leading(:erlang.float_to_binary(enq, decimals: 3), 15) <>
      String.pad_leading(:erlang.float_to_binary(e2e, decimals: 3), 15)
  )
end
