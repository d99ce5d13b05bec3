defmodule Mix.Tasks.NxVulkan.Info do
  @shortdoc "Prints the Vulkan devices, their features, pool and pipeline cache state"

  @moduledoc """
  Prints every Vulkan device the runtime sees (name, type, driver,
  features, limits), then opens one device context (the default device,
  or `--device N`) and prints its memory pool, queue counters, latency
  percentiles and pipeline cache state.

      mix nx_vulkan.info
      mix nx_vulkan.info --device 1
      mix nx_vulkan.info --no-open    # list devices only

  The device options of the application environment apply
  (`config :nx_vulkan, :device_options, ...`).
  """
  use Mix.Task

  @impl true
  def run(args) do
    {opts, _, invalid} = OptionParser.parse(args, strict: [device: :integer, open: :boolean])

    if invalid != [] do
      Mix.raise(
        "unknown options #{inspect(invalid)}; usage: mix nx_vulkan.info [--device N] [--no-open]"
      )
    end

    Mix.Task.run("app.start")
    devices = Nx.Vulkan.devices()
    if devices == [], do: Mix.shell().info("no Vulkan devices")
    Enum.each(devices, &print_device/1)

    if Keyword.get(opts, :open, true) and devices != [] do
      index = opts[:device] || Nx.Vulkan.default_device_index()

      unless Enum.any?(devices, &(&1.index == index)) do
        Mix.raise("no device #{index}: the runtime sees #{length(devices)}")
      end

      _ = Nx.Vulkan.device(index)
      print_stats(index, Nx.Vulkan.stats(index))
    end
  end

  defp print_device(d) do
    info = Mix.shell()

    info.info(
      "device #{d.index}: #{d.name} (#{d.type}, Vulkan #{d.api_version}, " <>
        "#{d.driver_name} #{d.driver_info})#{if d.usable, do: "", else: " - not usable"}"
    )

    features =
      d.features
      |> Enum.filter(fn {_k, v} -> v == true end)
      |> Enum.map(fn {k, _} -> Atom.to_string(k) end)
      |> Enum.sort()

    info.info("  features: #{Enum.join(features, ", ")}")

    info.info(
      "  subgroup #{d.features.subgroup_size} (#{d.features.subgroup_min_size}-" <>
        "#{d.features.subgroup_max_size}), device-local heap #{mib(d.limits.device_local_heap_size)}, " <>
        "max allocation #{mib(d.limits.max_memory_allocation_size)}, " <>
        "max storage buffer #{mib(d.limits.max_storage_buffer_range)}, " <>
        "shared memory #{d.limits.max_shared_memory} B"
    )
  end

  defp print_stats(index, s) do
    info = Mix.shell()
    info.info("device #{index} context:")

    info.info(
      "  pool: #{mib(s.pool_bytes_reserved)} reserved, #{mib(s.pool_bytes_in_use)} in use " <>
        "(peak #{mib(s.pool_bytes_peak)}), #{s.pool_live_buffers} live buffers, " <>
        "#{s.pool_hits} hits, #{s.pool_misses} misses, #{s.pool_allocations} allocations, " <>
        "#{s.pool_frees} frees, #{s.pool_trims} trims"
    )

    info.info(
      "  queue: #{s.ops_enqueued} ops enqueued, #{s.ops_completed} completed, " <>
        "#{s.submits} submits, GPU busy #{Float.round(s.gpu_busy_ns / 1.0e6, 3)} ms"
    )

    for key <- [:op_latency, :queue_wait, :batch_gpu, :download_wait] do
      h = Map.fetch!(s, key)

      line =
        if h.count == 0,
          do: "none",
          else:
            "#{h.count}, p50 <= #{us(Nx.Vulkan.percentile(h, 0.5))} us, " <>
              "p99 <= #{us(Nx.Vulkan.percentile(h, 0.99))} us, max #{us(h.max_ns)} us"

      info.info("  #{key}: #{line}")
    end

    cache =
      cond do
        s.cache_path == "" -> "no cache file"
        s.cache_file_rejected -> "#{s.cache_path} (rejected: #{s.cache_reject_reason})"
        s.cache_file_loaded -> "#{s.cache_path} (loaded)"
        true -> "#{s.cache_path} (not present yet)"
      end

    info.info(
      "  pipeline cache: #{cache}; #{s.pipelines} pipelines created " <>
        "(#{s.pipelines_pruned} from pruned SPIR-V, #{s.program_pipelines} for fused programs), " <>
        "#{s.pipeline_hits} hits, #{s.pipeline_misses} misses, #{s.pipeline_disk_hits} from disk, " <>
        "#{s.pipeline_waits} ops waited #{Float.round(s.pipeline_wait_ns / 1.0e6, 1)} ms for theirs"
    )
  end

  defp mib(bytes), do: "#{Float.round(bytes / 1_048_576, 1)} MiB"
  defp us(ns), do: Float.round(ns / 1000, 1)
end
