defmodule Nx.Vulkan.Memory do
  @moduledoc """
  What an allocating operation does when device memory runs out.

  The runtime first handles it in C: an allocation past the pool's limit
  trims the pool's unused buffers and waits for queued work to return the
  buffers it holds before failing. What C cannot see are tensors that no
  process references any more but that a process heap still holds until
  its next garbage collection. `alloc/2` runs an allocating NIF call and,
  when it fails with `:out_of_device_memory`:

    1. collects garbage in the calling process, waits for the queued work
       (`Nx.Vulkan.NIF.synchronize/1`) and trims the pool, then tries again;
    2. if that fails too, collects garbage in every process, waits and
       trims again, and tries a last time;
    3. then raises `Nx.Vulkan.OutOfMemoryError`.

  Other errors pass through unchanged. The retry costs nothing until
  memory runs out.
  """

  alias Nx.Vulkan.NIF

  @typedoc "A device index (opened through `Nx.Vulkan.device/1`) or a device context."
  @type device :: non_neg_integer | reference

  @doc """
  Runs `fun` (an allocating NIF call on `device`) with the recovery
  described in the moduledoc. Returns what `fun` returns.
  """
  @spec alloc(device, (() -> result)) :: result when result: var
  def alloc(device, fun) do
    fun.()
  rescue
    error in [Nx.Vulkan.Error] ->
      if error.status == :out_of_device_memory,
        do: retry(device, fun, [&collect_self/0, &collect_all/0], error),
        else: reraise(error, __STACKTRACE__)
  end

  defp retry(device, _fun, [], error) do
    ref = context(device)
    stats = NIF.device_stats(ref)
    index = if is_integer(device), do: device, else: nil

    raise Nx.Vulkan.OutOfMemoryError,
      message:
        "out of device memory on #{describe(index)} after collecting garbage and " <>
          "trimming the pool (#{stats.pool_bytes_in_use} bytes in use, " <>
          "#{stats.pool_bytes_reserved} reserved): #{error.message}",
      device: index,
      bytes_in_use: stats.pool_bytes_in_use,
      bytes_reserved: stats.pool_bytes_reserved
  end

  defp retry(device, fun, [collect | rest], _error) do
    ref = context(device)
    collect.()
    NIF.synchronize(ref)
    NIF.trim(ref)

    try do
      fun.()
    rescue
      error in [Nx.Vulkan.Error] ->
        if error.status == :out_of_device_memory,
          do: retry(device, fun, rest, error),
          else: reraise(error, __STACKTRACE__)
    end
  end

  defp context(index) when is_integer(index), do: Nx.Vulkan.device(index)
  defp context(ref), do: ref

  defp describe(nil), do: "the device context"
  defp describe(index), do: "device #{index}"

  defp collect_self, do: :erlang.garbage_collect()

  defp collect_all, do: Enum.each(Process.list(), &:erlang.garbage_collect/1)
end
