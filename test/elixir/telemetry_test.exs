defmodule Nx.Vulkan.TelemetryTest do
  # Events need :telemetry (a dependency of Nx); the NIF-level ones need no Nx.
  use ExUnit.Case, async: false
  @moduletag :telemetry
  @compile {:no_warn_undefined, [Nx, Nx.LinAlg, :telemetry]}

  alias Nx.Vulkan.NIF

  doctest Nx.Vulkan.Telemetry

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x::float-32-native>>)

  setup do
    previous = Application.get_env(:nx_vulkan, :telemetry_interval_ms)
    Application.put_env(:nx_vulkan, :telemetry_interval_ms, 20)
    # The poller reads the interval when it schedules its next tick.
    Process.sleep(600)

    on_exit(fn ->
      if previous,
        do: Application.put_env(:nx_vulkan, :telemetry_interval_ms, previous),
        else: Application.delete_env(:nx_vulkan, :telemetry_interval_ms)
    end)

    %{dev: Nx.Vulkan.device(), index: Nx.Vulkan.default_device_index()}
  end

  defp attach(events) do
    id = {__MODULE__, make_ref()}
    test = self()

    :ok = :telemetry.attach_many(id, events, &__MODULE__.forward/4, test)

    on_exit(fn -> :telemetry.detach(id) end)
    id
  end

  def forward(event, m, meta, test), do: send(test, {:event, event, m, meta})

  # Waits for a summary line matching re.
  defp line(re) do
    receive do
      {:line, line} -> if line =~ re, do: line, else: line(re)
    after
      5000 -> flunk("no summary line matching #{inspect(re)}")
    end
  end

  # Collects events until fun (on the list so far) says done, or 5 s.
  defp collect(event, done?, acc \\ []) do
    receive do
      {:event, ^event, m, meta} ->
        acc = [{m, meta} | acc]
        if done?.(acc), do: Enum.reverse(acc), else: collect(event, done?, acc)
    after
      5000 -> flunk("#{inspect(event)}: #{length(acc)} events, condition not met")
    end
  end

  test "every op of every batch is reported once, with bytes, waits and times", %{
    dev: dev,
    index: index
  } do
    attach([[:nx_vulkan, :submit]])
    # Recording starts at the poller's next tick.
    Process.sleep(100)
    info = NIF.device_info(index)
    calibrated? = info.features.calibrated_timestamps and info.limits.timestamp_bits > 0
    t0 = NIF.clock_ns()
    n = 1000
    x = NIF.upload(dev, :f32, f32(List.duplicate(1.0, n)))
    y = Enum.reduce(1..50, x, fn _, acc -> NIF.binary(:add, [n], acc, 0, nil, x, 0, nil) end)
    assert NIF.download(y, 0, 1) == f32([51.0])
    assert NIF.synchronize(dev) == :ok
    t1 = NIF.clock_ns()

    events =
      collect([:nx_vulkan, :submit], fn acc ->
        Enum.sum(for {m, _} <- acc, do: m.ops) >= 52
      end)

    for {m, meta} <- events do
      assert meta.device == index
      assert m.ops >= 1

      assert Map.keys(m) |> Enum.sort() == [
               :bytes,
               :gpu_end_time_ns,
               :gpu_start_time_ns,
               :gpu_time_ns,
               :latency_ns,
               :ops,
               :queue_wait_ns,
               :record_time_ns,
               :submit_time_ns
             ]

      assert m.latency_ns > 0
      assert m.submit_time_ns >= t0 and m.submit_time_ns <= t1
      assert m.record_time_ns >= t0 and m.record_time_ns <= m.submit_time_ns

      # GPU start and end on the same clock where the device calibrates its
      # timestamps and the queue writes them (lavapipe does both): after the
      # submission (50 us of slack for the calibration), as far apart as the
      # batch's GPU time.
      if calibrated? do
        assert m.gpu_start_time_ns + 50_000 >= m.submit_time_ns
        assert abs(m.gpu_end_time_ns - m.gpu_start_time_ns - m.gpu_time_ns) <= 1000
      else
        assert m.gpu_start_time_ns == 0 and m.gpu_end_time_ns == 0
      end
    end

    # The upload's copy and the 50 adds each write 4000 bytes or more.
    assert Enum.sum(for {m, _} <- events, do: m.bytes) >= 51 * 4 * n
  end

  test "pool and pipeline cache state are reported", %{dev: dev, index: index} do
    attach([[:nx_vulkan, :pool], [:nx_vulkan, :pipeline_cache]])
    Process.sleep(100)
    # A size class not used elsewhere, so the pool changes.
    t = NIF.upload(dev, :f32, f32(List.duplicate(2.0, 12_345)))

    [{m, meta} | _] =
      collect([:nx_vulkan, :pool], fn acc ->
        Enum.any?(acc, fn {m, _} -> m.live_buffers > 0 end)
      end)

    assert meta.device == index
    assert m.reserved >= m.in_use and m.peak >= m.in_use

    assert Map.keys(m) |> Enum.sort() ==
             [
               :allocations,
               :frees,
               :hits,
               :in_use,
               :live_buffers,
               :misses,
               :peak,
               :reserved,
               :trims
             ]

    NIF.deallocate(t)

    # Opening reports the cache file's state.
    :ok = Nx.Vulkan.Telemetry.device_opened(index, dev)

    {c, cmeta} =
      collect([:nx_vulkan, :pipeline_cache], fn acc ->
        Enum.any?(acc, fn {_, meta} -> meta.action == :open end)
      end)
      |> List.last()

    assert cmeta.action == :open and cmeta.device == index
    assert is_boolean(cmeta.loaded) and is_boolean(cmeta.rejected)
    assert c.pipelines >= 0 and c.hits >= 0
    assert c.pruned >= 0 and c.pruned <= c.pipelines
    assert c.programs >= 0 and c.programs <= c.pipelines
  end

  @tag :nx
  test "downloads are spans, fallbacks are events, and the summary prints them" do
    attach([[:nx_vulkan, :download, :stop], [:nx_vulkan, :fallback]])
    test = self()
    summary = Nx.Vulkan.Telemetry.attach_summary(&send(test, {:line, &1}))
    on_exit(fn -> :telemetry.detach(summary) end)
    # Downloads are spans from the poller's next tick on (up to 5 s on a
    # loaded host).
    Enum.reduce_while(1..500, nil, fn _, _ ->
      if :persistent_term.get({Nx.Vulkan.Telemetry, :download}, false),
        do: {:halt, :ok},
        else: {:cont, Process.sleep(10)}
    end)

    t = Nx.iota({3, 4}, type: :f32, backend: Nx.Vulkan.Backend)
    assert Nx.to_binary(t) == f32(Enum.map(0..11, &(&1 * 1.0)))
    [{m, meta}] = collect([:nx_vulkan, :download, :stop], fn _ -> true end)
    assert meta.elements == 12 and meta.bytes == 48
    assert is_integer(m.duration) and m.duration > 0

    Nx.map(t, &Nx.add(&1, 1))
    [{fm, fmeta}] = collect([:nx_vulkan, :fallback], fn _ -> true end)
    assert fm.count == 1 and fmeta.op == :map and is_binary(fmeta.reason)

    assert line(~r/downloaded 48 bytes in/) =~ ~r/^nx_vulkan device \d+: /
    assert line(~r/map ran on the host/) =~ ~r/^nx_vulkan: map ran on the host \(.+\)$/
  end

  test "all events are listed" do
    assert [:nx_vulkan, :submit] in Nx.Vulkan.Telemetry.events()
    assert length(Nx.Vulkan.Telemetry.events()) == 8
  end
end
