# Host time per tiny op, layer by layer, in bursts the queue absorbs.
#
#   mix run bench/host_burst.exs [--rounds N] [--burst N] [--layers LIST]
#                                [--elements N]
#
#   --rounds N     bursts per timed run (default 3000; three timed runs
#                  after 300 untimed bursts)
#   --burst N      ops per burst (default 64)
#   --layers LIST  comma-separated among null, nif, nif_imm, backend,
#                  backend_imm, nx, nx_tensor (default: all, in that
#                  order)
#   --elements N   elements of each operand (default 16). 0 (layers nif,
#                  nif_imm, backend and backend_imm only: Nx itself makes
#                  no empty tensors) queues no device work, leaving the
#                  NIF and the backend's Elixir alone
#
# Each burst follows `Nx.Vulkan.synchronize/1`, so the ring is empty, the
# scheduler has work for the GPU at once and no producer waits for room:
# the time until the burst's last call returned, divided by its ops, is
# the calling process's own cost per op (its share of garbage collection
# and of releasing earlier bursts' results included). Layers, each an add
# of --elements f32 elements on the default device:
#
#   * null: `Nx.add(x, 1)` on NxBench.NullBackend (bench/models.exs), whose
#     callbacks do nothing: Nx's own front end.
#   * nif: `Nx.Vulkan.NIF.binary/8` with a resident tensor operand.
#   * nif_imm: the same with the number as an immediate operand (what
#     `Nx.add(x, 1)` reaches).
#   * backend: `Nx.Vulkan.Backend.add/3` called directly with a resident
#     tensor operand (Nx's arguments for `Nx.add(x, ones)`): this backend's
#     Elixir and the NIF.
#   * backend_imm: the same with Nx's constant for the number 1 (what
#     `Nx.add(x, 1)` hands the backend).
#   * nx: `Nx.add(x, 1)` on Nx.Vulkan.Backend: the front end, the number's
#     constant, this backend's Elixir and the NIF.
#   * nx_tensor: `Nx.add(x, ones)`, ones a resident tensor.
#
# Prints one line per layer: its three runs' µs per op, then their median.
alias Nx.Vulkan.NIF

{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [rounds: :integer, burst: :integer, layers: :string, elements: :integer]
  )

rounds = Keyword.get(opts, :rounds, 3000)
burst = Keyword.get(opts, :burst, 64)
n = Keyword.get(opts, :elements, 16)
all = ["null", "nif", "nif_imm", "backend", "backend_imm", "nx", "nx_tensor"]
no_device_work = ["nif", "nif_imm", "backend", "backend_imm"]
default_layers = if n == 0, do: no_device_work, else: all

layers =
  opts |> Keyword.get(:layers, Enum.join(default_layers, ",")) |> String.split(",", trim: true)

if rest != [] or invalid != [] or rounds < 1 or burst < 1 or n < 0 or layers -- all != [] or
     (n == 0 and layers -- no_device_work != []) do
  IO.puts(
    :stderr,
    "usage: mix run bench/host_burst.exs [--rounds N] [--burst N] [--layers LIST] " <>
      "[--elements N] (--elements 0: layers nif, nif_imm, backend, backend_imm)"
  )

  System.halt(2)
end

Code.require_file("models.exs", __DIR__)

f32 = fn list -> for v <- list, into: <<>>, do: <<v::float-32-native>> end
index = Nx.Vulkan.default_device_index()
dev = Nx.Vulkan.device(index)
one = NIF.upload(dev, :f32, f32.(List.duplicate(1.0, n)))
xr = NIF.upload(dev, :f32, f32.(List.duplicate(2.0, n)))
imm = <<1.0::float-32-native>>
# The same buffers as Nx tensors of this backend (Nx.tensor/2 would refuse
# zero elements).
as_tensor = fn ref ->
  %{Nx.template({n}, :f32) | data: %Nx.Vulkan.Backend{ref: ref, device: index}}
end

x = as_tensor.(xr)
ones = as_tensor.(one)
xn = NxBench.NullBackend.null(Nx.template({max(n, 1)}, :f32))
out = Nx.template({n}, :f32)
c = Nx.Vulkan.Backend.constant(Nx.template({}, :s64), 1, [])

calls = %{
  "null" => fn -> Nx.add(xn, 1) end,
  "nif" => fn -> NIF.binary(:add, [n], xr, 0, nil, one, 0, nil) end,
  "nif_imm" => fn -> NIF.binary(:add, [n], xr, 0, nil, imm, 0, nil) end,
  "backend" => fn -> Nx.Vulkan.Backend.add(out, x, ones) end,
  "backend_imm" => fn -> Nx.Vulkan.Backend.add(out, x, c) end,
  "nx" => fn -> Nx.add(x, 1) end,
  "nx_tensor" => fn -> Nx.add(x, ones) end
}

# Total ns of n bursts of call, each timed from after a synchronize until
# its last call returned; the results stay referenced until the burst ends.
run = fn call, n ->
  Enum.reduce(1..n, 0, fn _, acc ->
    :ok = NIF.synchronize(dev)
    t0 = System.monotonic_time(:nanosecond)
    _results = for _ <- 1..burst, do: call.()
    acc + System.monotonic_time(:nanosecond) - t0
  end)
end

for layer <- layers do
  call = Map.fetch!(calls, layer)
  backend = if layer == "null", do: NxBench.NullBackend, else: Nx.Vulkan.Backend
  previous = Nx.default_backend(backend)
  run.(call, 300)
  us = for _ <- 1..3, do: run.(call, rounds) / rounds / burst / 1000
  Nx.default_backend(previous)
  median = us |> Enum.sort() |> Enum.at(1)
  runs = Enum.map_join(us, " ", &:erlang.float_to_binary(&1, decimals: 3))
  IO.puts("#{String.pad_trailing(layer, 11)} #{runs}   median #{Float.round(median, 3)} us/op")
end

:ok = NIF.synchronize(dev)
