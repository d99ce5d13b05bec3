defmodule Nx.Vulkan.Telemetry do
  @moduledoc """
  `:telemetry` events of the Vulkan backend.

  Events are emitted when the `:telemetry` application is loaded (Nx
  depends on it); without it every function here is a no-op. All
  durations are in native time units (`System.convert_time_unit/3`),
  except the `_ns` measurements, which are nanoseconds measured in C.

    * `[:nx_vulkan, :submit]` - one per batch of device ops the scheduler
      submitted and the device completed. Measurements: `ops` (ops in the
      batch, a synchronize marker that joined it counting as one), `bytes` (bytes its ops
      write), `queue_wait_ns` (enqueue of its first op to its submission),
      `gpu_time_ns` (GPU time from timestamp queries; 0 where the queue
      writes none), `latency_ns` (submission to completion seen), and
      `record_time_ns`, `submit_time_ns`, `gpu_start_time_ns`,
      `gpu_end_time_ns`: when its first op was taken off the queue to be
      recorded, when it was submitted and when the GPU started and ended
      it, in nanoseconds on the runtime's monotonic clock
      (`Nx.Vulkan.NIF.clock_ns/0`; the GPU's two through calibrated
      timestamps, 0 where the device has none), so that the host's
      recording time, the time from submission to start and the GPU's idle
      time between batches can be read off. Metadata:
      `device` (index). Batches are recorded in C only while a handler is
      attached to this event, and delivered every `:telemetry_interval_ms`
      (oldest first); when more than 4096 batches wait between two
      deliveries the excess is counted in
      `[:nx_vulkan, :submit, :dropped]` (measurement `count`).
    * `[:nx_vulkan, :download, :start | :stop | :exception]` - a span
      around each download of a tensor to the host (`Nx.to_binary/1`,
      `Nx.to_number/1`, ...). Start metadata: `device`, `elements`; stop
      adds `bytes`. Measurements as `:telemetry.span/3`. Emitted while a
      handler is attached to one of the three events, from the poller's
      next tick on (within `:telemetry_interval_ms`).
    * `[:nx_vulkan, :pool]` - the device memory pool, every
      `:telemetry_interval_ms` while a handler is attached and a value
      changed. Measurements: `reserved`, `in_use`, `peak` (bytes),
      `hits`, `misses`, `trims`, `allocations`, `frees`, `live_buffers`
      (counts since the device opened). Metadata: `device`.
    * `[:nx_vulkan, :fallback]` - an op computed on the host
      (`Nx.Vulkan.fallbacks/0`). Measurements: `count` (1). Metadata: `op`,
      `reason`.
    * `[:nx_vulkan, :pipeline_cache]` - when a device opens (`action:
      :open`) and every `:telemetry_interval_ms` in which pipelines were
      created or looked up (`action: :update`). Measurements: `pipelines`
      (created), `pruned` and `programs` (of them, from pruned SPIR-V and
      for fused programs), `hits`, `misses` (in-memory lookups),
      `disk_hits` (creations the driver served from the cache file),
      `waits` and `wait_ns` (ops whose pipeline was still being created
      in the background when the scheduler reached them, and its time
      waiting for them). Metadata:
      `device`, `action`, `path`, `loaded` (the file was read),
      `rejected` and `reject_reason` (the file was unusable: truncated,
      another device or driver).

  The latency histograms of `Nx.Vulkan.stats/1` are kept in C whether or
  not handlers are attached.

  `attach_summary/1` attaches handlers that print a summary, an example
  of handling these events.
  """
  use GenServer
  @compile {:no_warn_undefined, :telemetry}

  alias Nx.Vulkan.NIF

  @submit [:nx_vulkan, :submit]
  @pool [:nx_vulkan, :pool]
  @cache [:nx_vulkan, :pipeline_cache]

  @doc "The events this module emits (spans as their three events)."
  @spec events() :: [[atom]]
  def events do
    [
      @submit,
      @submit ++ [:dropped],
      [:nx_vulkan, :download, :start],
      [:nx_vulkan, :download, :stop],
      [:nx_vulkan, :download, :exception],
      @pool,
      [:nx_vulkan, :fallback],
      @cache
    ]
  end

  @doc "True when `:telemetry` is loaded (events are emitted)."
  @spec available?() :: boolean
  def available? do
    case :persistent_term.get({__MODULE__, :available}, :unknown) do
      :unknown ->
        available = Code.ensure_loaded?(:telemetry)
        :persistent_term.put({__MODULE__, :available}, available)
        available

      available ->
        available
    end
  end

  @doc false
  @spec execute([atom], map, map) :: :ok
  def execute(event, measurements, metadata) do
    if available?(), do: :telemetry.execute(event, measurements, metadata)
    :ok
  end

  @doc false
  # The download span of `Nx.Vulkan.Backend`.
  @spec download_span(non_neg_integer, non_neg_integer, (() -> binary)) :: binary
  def download_span(device, elements, fun) do
    # The poller notes whether a handler is attached: without one the span
    # would cost its two lookups and clock reads (about 1 us) per download.
    if :persistent_term.get({__MODULE__, :download}, false) do
      :telemetry.span([:nx_vulkan, :download], %{device: device, elements: elements}, fn ->
        bin = fun.()
        {bin, %{device: device, elements: elements, bytes: byte_size(bin)}}
      end)
    else
      fun.()
    end
  end

  @doc false
  # Called by `Nx.Vulkan.device/1` when it opens a device.
  @spec device_opened(non_neg_integer, reference) :: :ok
  def device_opened(index, ref) do
    {recording, cache} =
      if available?() do
        stats = NIF.device_stats(ref)
        cache = cache_measurements(stats)
        :telemetry.execute(@cache, cache, cache_metadata(index, stats, :open))
        # Batches of a device opened with a handler attached are recorded
        # from the start, not from the poller's next tick.
        recording = attached?(@submit)
        if recording, do: NIF.record_batches(ref, true)
        {recording, cache}
      else
        {false, nil}
      end

    if Process.whereis(__MODULE__),
      do: GenServer.cast(__MODULE__, {:opened, index, ref, recording, cache})

    :ok
  end

  @doc """
  Attaches handlers to every event that print a one-line summary of each
  (`IO.puts/1`, or `fun` when given a one-argument function) and returns
  the handler id, for `:telemetry.detach/1`. An example of consuming the
  events:

      id = Nx.Vulkan.Telemetry.attach_summary()
      Nx.add(Nx.iota({1000}), 1) |> Nx.to_number()
      :telemetry.detach(id)
  """
  @spec attach_summary((String.t() -> any)) :: term
  def attach_summary(print \\ &IO.puts/1) do
    id = {__MODULE__, :summary, make_ref()}

    :ok = :telemetry.attach_many(id, events(), &__MODULE__.summarize/4, %{print: print})

    id
  end

  @doc false
  def summarize(event, measurements, metadata, %{print: print}) do
    print.(summary(event, measurements, metadata))
  end

  @doc """
  A one-line description of an event (used by `attach_summary/1`).

      iex> Nx.Vulkan.Telemetry.summary([:nx_vulkan, :submit],
      ...>   %{ops: 12, bytes: 4096, queue_wait_ns: 1500, gpu_time_ns: 8000, latency_ns: 21000},
      ...>   %{device: 0})
      "nx_vulkan device 0: batch of 12 ops, 4096 bytes written, queued 1.5 us, GPU 8.0 us, completed 21.0 us after submit"
  """
  @spec summary([atom], map, map) :: String.t()
  def summary([:nx_vulkan, :submit], m, %{device: d}) do
    "nx_vulkan device #{d}: batch of #{m.ops} ops, #{m.bytes} bytes written, " <>
      "queued #{us(m.queue_wait_ns)} us, GPU #{us(m.gpu_time_ns)} us, " <>
      "completed #{us(m.latency_ns)} us after submit"
  end

  def summary([:nx_vulkan, :submit, :dropped], m, %{device: d}),
    do: "nx_vulkan device #{d}: #{m.count} batches not recorded (backlog full)"

  def summary([:nx_vulkan, :download, :start], _m, meta),
    do: "nx_vulkan device #{meta.device}: download of #{meta.elements} elements"

  def summary([:nx_vulkan, :download, :stop], m, meta) do
    ns = System.convert_time_unit(m.duration, :native, :nanosecond)
    "nx_vulkan device #{meta.device}: downloaded #{meta.bytes} bytes in #{us(ns)} us"
  end

  def summary([:nx_vulkan, :download, :exception], _m, meta),
    do: "nx_vulkan device #{meta.device}: download failed (#{inspect(meta[:reason])})"

  def summary([:nx_vulkan, :pool], m, %{device: d}) do
    "nx_vulkan device #{d}: pool #{m.in_use} of #{m.reserved} bytes in use (peak #{m.peak}), " <>
      "#{m.hits} hits, #{m.misses} misses, #{m.trims} trims"
  end

  def summary([:nx_vulkan, :fallback], _m, meta),
    do: "nx_vulkan: #{meta.op} ran on the host (#{meta.reason})"

  def summary([:nx_vulkan, :pipeline_cache], m, meta) do
    "nx_vulkan device #{meta.device}: pipeline cache #{meta.action}, #{m.pipelines} pipelines, " <>
      "#{m.hits} hits, #{m.misses} misses, #{m.disk_hits} from disk" <>
      if(meta.rejected, do: " (file rejected: #{meta.reject_reason})", else: "")
  end

  defp us(ns), do: Float.round(ns / 1000, 1)

  ## The poller

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts, name: __MODULE__)

  @impl true
  def init(_opts) do
    state = %{devices: %{}, recording: %{}, last_pool: %{}, last_cache: %{}}
    {:ok, schedule(state)}
  end

  @impl true
  def handle_cast({:opened, index, ref, recording, cache}, state) do
    state = %{
      state
      | devices: Map.put(state.devices, index, ref),
        recording: Map.put(state.recording, index, recording)
    }

    state =
      if cache, do: %{state | last_cache: Map.put(state.last_cache, index, cache)}, else: state

    {:noreply, state}
  end

  @impl true
  def handle_info(:tick, state) do
    state =
      if available?() do
        note_download_handlers()
        submit? = attached?(@submit)
        pool? = attached?(@pool)
        cache? = attached?(@cache)

        Enum.reduce(state.devices, state, fn {index, ref}, st ->
          st
          |> poll_batches(index, ref, submit?)
          |> poll_stats(index, ref, pool?, cache?)
        end)
      else
        state
      end

    {:noreply, schedule(state)}
  end

  defp schedule(state) do
    Process.send_after(
      self(),
      :tick,
      Application.get_env(:nx_vulkan, :telemetry_interval_ms, 500)
    )

    state
  end

  defp note_download_handlers do
    on? = Enum.any?([:start, :stop, :exception], &attached?([:nx_vulkan, :download, &1]))

    # persistent_term writes are costly: only on a change.
    if :persistent_term.get({__MODULE__, :download}, false) != on?,
      do: :persistent_term.put({__MODULE__, :download}, on?)
  end

  defp attached?(event),
    do: Enum.any?(:telemetry.list_handlers(event), &(&1.event_name == event))

  defp poll_batches(state, index, ref, on?) do
    was? = Map.get(state.recording, index, false)

    if on? != was?, do: NIF.record_batches(ref, on?)
    if on?, do: drain(index, ref)
    %{state | recording: Map.put(state.recording, index, on?)}
  end

  defp drain(index, ref) do
    {records, dropped} = NIF.take_batches(ref)
    meta = %{device: index}

    for {ops, bytes, wait, gpu, latency, recorded, submitted, started, ended} <- records do
      :telemetry.execute(
        @submit,
        %{
          ops: ops,
          bytes: bytes,
          queue_wait_ns: wait,
          gpu_time_ns: gpu,
          latency_ns: latency,
          record_time_ns: recorded,
          submit_time_ns: submitted,
          gpu_start_time_ns: started,
          gpu_end_time_ns: ended
        },
        meta
      )
    end

    if dropped > 0, do: :telemetry.execute(@submit ++ [:dropped], %{count: dropped}, meta)
    if length(records) == 256, do: drain(index, ref)
    :ok
  end

  defp poll_stats(state, _index, _ref, false, false), do: state

  defp poll_stats(state, index, ref, pool?, cache?) do
    stats = NIF.device_stats(ref)
    pool = pool_measurements(stats)
    cache = cache_measurements(stats)

    if pool? and Map.get(state.last_pool, index) != pool,
      do: :telemetry.execute(@pool, pool, %{device: index})

    if cache? and Map.get(state.last_cache, index, cache) != cache,
      do: :telemetry.execute(@cache, cache, cache_metadata(index, stats, :update))

    %{
      state
      | last_pool: Map.put(state.last_pool, index, pool),
        last_cache: Map.put(state.last_cache, index, cache)
    }
  end

  defp pool_measurements(s) do
    %{
      reserved: s.pool_bytes_reserved,
      in_use: s.pool_bytes_in_use,
      peak: s.pool_bytes_peak,
      hits: s.pool_hits,
      misses: s.pool_misses,
      trims: s.pool_trims,
      allocations: s.pool_allocations,
      frees: s.pool_frees,
      live_buffers: s.pool_live_buffers
    }
  end

  defp cache_measurements(s) do
    %{
      pipelines: s.pipelines,
      pruned: s.pipelines_pruned,
      programs: s.program_pipelines,
      hits: s.pipeline_hits,
      misses: s.pipeline_misses,
      disk_hits: s.pipeline_disk_hits,
      waits: s.pipeline_waits,
      wait_ns: s.pipeline_wait_ns
    }
  end

  defp cache_metadata(index, s, action) do
    %{
      device: index,
      action: action,
      path: s.cache_path,
      loaded: s.cache_file_loaded,
      rejected: s.cache_file_rejected,
      reject_reason: s.cache_reject_reason
    }
  end
end
