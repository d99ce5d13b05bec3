defmodule Nx.Vulkan.ReliabilityTest do
  # Load, soak, out of memory, device loss, process death: NIF-level (no
  # Nx needed). Sizes are CI-sized; NX_VULKAN_LOAD_OPS and
  # NX_VULKAN_SOAK_OPS scale them up, and bench/load.exs and bench/soak.exs
  # are the long versions.
  use ExUnit.Case, async: false

  alias Nx.Vulkan.{NIF, Workload}
  import Bitwise

  @moduletag timeout: 600_000

  defp env_int(name, default) do
    case System.get_env(name) do
      nil -> default
      "" -> default
      v -> String.to_integer(v)
    end
  end

  defp open(opts \\ %{}), do: NIF.open_device(-1, Map.merge(%{disable_disk_cache: true}, opts))

  # Opening a device with each of the bad values of option raises.
  defp assert_refused(option, bad_values) do
    for bad <- bad_values do
      assert_raise ArgumentError, fn -> open(%{option => bad}) end
    end
  end

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x * 1.0::float-32-native>>)
  defp to_f32(bin), do: for(<<x::float-32-native <- bin>>, do: x)

  # Waits until queued work has retired and garbage is gone, then reads
  # the pool.
  defp settled(dev) do
    :erlang.garbage_collect()
    NIF.synchronize(dev)
    NIF.device_stats(dev)
  end

  describe "load" do
    test "256 processes of mixed ops on one device: exact results, no error" do
      dev = open()
      ops = env_int("NX_VULKAN_LOAD_OPS", 120)

      queued =
        1..256
        |> Enum.map(fn seed -> Task.async(fn -> Workload.mixed(dev, seed, ops) end) end)
        |> Task.await_many(:infinity)
        |> Enum.sum()

      assert queued >= 256 * ops
      s = settled(dev)
      assert NIF.device_status(dev) == :ok
      assert s.ops_completed == s.ops_enqueued
    end
  end

  describe "soak" do
    test "a long loop: pool, live buffers, pipelines and RSS stay flat" do
      # A 1 MiB staging ring: warm-up wraps it (each step uploads 1 KiB),
      # so that the pages it touches the first time are all in the RSS.
      # Pool chunks of 8 MiB, so that the slack below is one chunk.
      dev = open(%{staging_bytes: 1 <<< 20, pool_chunk_bytes: 8 <<< 20})
      state = Workload.init(dev)
      steps = max(div(env_int("NX_VULKAN_SOAK_OPS", 100_000), 10), 4000)
      warmup = max(div(steps, 5), 2000)
      for _ <- 1..warmup, do: assert(Workload.step(dev, state) == state.expected)
      base = Workload.sample(dev)
      _ = settled(dev)
      base_settled = Workload.sample(dev)

      samples =
        for chunk <- 1..8 do
          for _ <- 1..max(div(steps - warmup, 8), 1),
              do: assert(Workload.step(dev, state) == state.expected)

          {chunk, Workload.sample(dev)}
        end

      _ = settled(dev)
      final = Workload.sample(dev)
      # (state stays referenced until here: its buffers are part of both.)
      assert Workload.step(dev, state) == state.expected

      for {chunk, s} <- samples do
        # No pipeline is created after warm-up; the pool never grows past
        # what warm-up needed plus one chunk of slack for scheduling jitter.
        assert s.pipelines == base.pipelines, "chunk #{chunk}: #{inspect(s)}"
        assert s.pool_reserved <= max(base.pool_reserved, base_settled.pool_reserved) + (8 <<< 20)
        assert s.staging == base.staging
      end

      # Settled, exactly the buffers of before: nothing leaked.
      assert final.live_buffers == base_settled.live_buffers
      assert final.pool_in_use == base_settled.pool_in_use
      # At most 100 bytes per op over the run (a leak of one small
      # allocation per step would show).
      assert (final.rss_kb - base.rss_kb) * 1024 < 100 * (steps - warmup) * 10,
             inspect({base, final})
    end
  end

  describe "out of device memory" do
    setup do
      %{dev: open(%{pool_limit_bytes: 32 <<< 20})}
    end

    defp alloc(dev, mib) do
      Nx.Vulkan.Memory.alloc(dev, fn ->
        NIF.fill(dev, :f32, mib <<< 18, <<1.5::float-32-native>>)
      end)
    end

    test "raises OutOfMemoryError after trimming and collecting; the device stays usable",
         %{dev: dev} do
      held = for _ <- 1..6, do: alloc(dev, 4)

      error =
        assert_raise Nx.Vulkan.OutOfMemoryError, ~r/out of device memory/, fn ->
          for _ <- 1..4, do: alloc(dev, 4)
        end

      assert error.bytes_in_use >= 24 <<< 20
      assert error.bytes_reserved <= 32 <<< 20
      assert error.message =~ "limit"
      # Nothing was lost: the held tensors are intact, the device works.
      for t <- held, do: assert(to_f32(NIF.download(t, (4 <<< 18) - 2, 2)) == [1.5, 1.5])
      assert NIF.device_status(dev) == :ok
      # (the two tensors made before the failure are garbage by now)
      a = Nx.Vulkan.Memory.alloc(dev, fn -> NIF.upload(dev, :f32, f32([1, 2, 3])) end)
      b = Nx.Vulkan.Memory.alloc(dev, fn -> NIF.binary(:add, [3], a, 0, nil, a, 0, nil) end)
      assert to_f32(NIF.download(b, 0, 3)) == [2, 4, 6]
      # A request that can never fit fails the same way, at once.
      assert_raise Nx.Vulkan.OutOfMemoryError, fn -> alloc(dev, 64) end
    end

    test "garbage of this process and of others is collected before failing", %{dev: dev} do
      # Fill the pool, then drop the references without collecting.
      Enum.each(1..7, fn _ -> alloc(dev, 4) end)
      # This process's garbage is collected on the first failure.
      t = alloc(dev, 8)
      assert to_f32(NIF.download(t, 0, 1)) == [1.5]

      # Garbage held by another process's heap is collected on the second.
      parent = self()

      pid =
        spawn(fn ->
          Enum.each(1..5, fn _ -> alloc(dev, 4) end)
          send(parent, :filled)
          receive do: (:stop -> :ok)
        end)

      assert_receive :filled, 30_000
      u = alloc(dev, 16)
      assert to_f32(NIF.download(u, (16 <<< 18) - 1, 1)) == [1.5]
      send(pid, :stop)
      assert NIF.device_status(dev) == :ok
    end

    test "other device errors pass through unchanged", %{dev: dev} do
      a = NIF.upload(dev, :f32, f32([1]))
      NIF.synchronize(dev)
      NIF.inject_fault(dev, :submit_failed)

      assert_raise Nx.Vulkan.Error, ~r/injected/, fn ->
        NIF.download(NIF.unary(:negate, [1], a, 0, nil), 0, 1)
      end

      error = assert_raise Nx.Vulkan.Error, fn -> alloc(dev, 1) end
      assert error.status == :submit_failed
    end
  end

  describe "device loss and submit failure" do
    # Chained [64, 65536] x [65536, 64] products (0.5 GFLOP each, 16 KiB
    # results): A[i][p] = prev[64 i] (zero k stride), so each waits for the
    # one before it on any GPU. About `seconds` of GPU work. Returns the
    # last and a tensor queued after all of them.
    defp long_work(dev, seconds) do
      a = NIF.fill(dev, :f32, 64 <<< 16, <<0.5::float-32-native>>)
      zero = NIF.fill(dev, :f32, 64 * 64, <<0.0::float-32-native>>)
      mm = fn prev -> NIF.matmul(1, 64, 64, 1 <<< 16, prev, 0, [0, 64, 0], a, 0, [0, 64, 1]) end
      chain = fn from, n -> Enum.reduce(1..n, from, fn _, prev -> mm.(prev) end) end
      cur = chain.(zero, 1)
      NIF.synchronize(dev)
      # Fast devices time 64 more products, to see past the submit latency.
      {cur, per} =
        Enum.reduce_while([4, 64], {cur, 0}, fn n, {cur, _} ->
          t0 = System.monotonic_time(:microsecond)
          cur = chain.(cur, n)
          NIF.synchronize(dev)
          us = System.monotonic_time(:microsecond) - t0
          if us > 50_000, do: {:halt, {cur, us / n}}, else: {:cont, {cur, us / n}}
        end)

      n = min(max(round(seconds * 1.0e6 / max(per, 1)), 8), 200_000)
      last = chain.(cur, n)
      {last, NIF.unary(:negate, [64 * 64], last, 0, nil)}
    end

    # Queues `seconds` of GPU work, twelve processes waiting on it (on its
    # last product, on an op behind it, on synchronize), then a device
    # loss. Returns {dev, last, later, [{waiter, result, µs after the
    # loss}]}.
    defp lose_with_waiters(seconds, attempts) do
      dev = open()
      {tail, later} = long_work(dev, seconds)
      parent = self()

      waiters =
        for i <- 1..12 do
          spawn(fn ->
            result =
              try do
                case rem(i, 3) do
                  0 -> NIF.download(tail, 0, 1)
                  1 -> NIF.download(later, 0, 1)
                  2 -> NIF.synchronize(dev)
                end
              rescue
                e in Nx.Vulkan.Error -> {:error, e.status, e.message}
              end

            send(parent, {:woke, i, result, System.monotonic_time(:microsecond)})
          end)
        end

      # (The ring's backpressure can hold the queuing above until the GPU
      # has only the last few thousand products left: inject soon.)
      Process.sleep(30)
      s = NIF.device_stats(dev)

      if s.ops_completed == s.ops_enqueued and attempts > 1 do
        # A GPU that outran the calibration drained it all: again, longer.
        for _ <- waiters, do: assert_receive({:woke, _, _, _}, 30_000)
        lose_with_waiters(seconds * 4, attempts - 1)
      else
        assert s.ops_completed < s.ops_enqueued, "the work finished before the loss"
        injected = System.monotonic_time(:microsecond)
        NIF.inject_fault(dev, :device_lost)

        woke =
          for _ <- waiters do
            assert_receive {:woke, i, result, at}, 5_000
            {i, result, at - injected}
          end

        {dev, tail, later, woke}
      end
    end

    test "a lost device wakes every waiter within a second; later ops fail fast; a new context works" do
      {dev, tail, later, woke} = lose_with_waiters(3.0, 2)

      for {i, result, after_us} <- woke do
        assert {:error, :device_lost, message} = result, "waiter #{i}: #{inspect(woke)}"
        # (at once with batches in flight, or at the next submission when
        # the scheduler still held the work)
        assert message =~ "injected"
        assert after_us < 1_000_000, "waiter #{i} woke #{after_us} us after the loss"
      end

      assert {:device_lost, _} = NIF.device_status(dev)
      t0 = System.monotonic_time(:microsecond)

      error = assert_raise Nx.Vulkan.Error, fn -> NIF.unary(:abs, [64 * 64], tail, 0, nil) end

      assert error.status == :device_lost
      assert_raise Nx.Vulkan.Error, ~r/injected/, fn -> NIF.download(later, 0, 1) end
      assert_raise Nx.Vulkan.Error, ~r/injected/, fn -> NIF.upload(dev, :f32, f32([1])) end
      # Without waiting for the work still on the GPU (seconds of it; on a
      # CPU device it also competes for the cores).
      assert System.monotonic_time(:microsecond) - t0 < 500_000

      fresh = open()
      a = NIF.upload(fresh, :f32, f32([1, 2]))
      assert to_f32(NIF.download(NIF.binary(:add, [2], a, 0, nil, a, 0, nil), 0, 2)) == [2, 4]
    end

    test "a failed submission is sticky with its cause" do
      dev = open()
      a = NIF.upload(dev, :f32, f32([1, 2]))
      NIF.synchronize(dev)
      NIF.inject_fault(dev, :submit_failed)
      b = NIF.unary(:negate, [2], a, 0, nil)
      error = assert_raise Nx.Vulkan.Error, fn -> NIF.download(b, 0, 2) end
      assert error.status == :submit_failed and error.message =~ "injected"
      assert {:submit_failed, msg} = NIF.device_status(dev)
      assert msg =~ "injected"

      for f <- [
            fn -> NIF.download(a, 0, 2) end,
            fn -> NIF.unary(:abs, [2], a, 0, nil) end,
            fn -> NIF.synchronize(dev) end
          ] do
        assert %Nx.Vulkan.Error{status: :submit_failed} = catch_error(f.())
      end
    end
  end

  describe "pipeline creation failures" do
    test "in the background: the device fails with the cause when it reaches the op" do
      dev = open(%{pipeline_threads: 2})
      a = NIF.upload(dev, :f32, f32([1, 2]))
      NIF.synchronize(dev)
      NIF.inject_fault(dev, :pipeline_failed)
      # The op returns; its pipeline's creation fails on a worker thread.
      b = NIF.unary(:sin, [2], a, 0, nil)
      error = assert_raise Nx.Vulkan.Error, fn -> NIF.download(b, 0, 2) end
      assert error.status == :out_of_device_memory
      assert error.message =~ "vkCreateComputePipelines" and error.message =~ "injected"
      assert {:out_of_device_memory, msg} = NIF.device_status(dev)
      assert msg =~ "injected"

      assert %Nx.Vulkan.Error{status: :out_of_device_memory} =
               catch_error(NIF.unary(:abs, [2], a, 0, nil))
    end

    test "on the calling thread: the op raises and the device goes on" do
      dev = open(%{pipeline_threads: :off})
      a = NIF.upload(dev, :f32, f32([1, -2]))
      NIF.inject_fault(dev, :pipeline_failed)

      error = assert_raise Nx.Vulkan.Error, fn -> NIF.unary(:cos, [2], a, 0, nil) end
      assert error.status == :out_of_device_memory and error.message =~ "injected"
      assert NIF.device_status(dev) == :ok
      assert to_f32(NIF.download(NIF.unary(:negate, [2], a, 0, nil), 0, 2)) == [-1, 2]
      assert NIF.device_stats(dev).pipeline_waits == 0
    end

    test "bad thread counts are refused" do
      assert_refused(:pipeline_threads, [-1, 65, :on, 1.5])
    end
  end

  describe "a GPU that stops making progress" do
    test "with batch_timeout_ms the device fails and its waiters wake" do
      dev = open(%{batch_timeout_ms: 300})
      a = NIF.upload(dev, :f32, f32([1, -2]))
      assert to_f32(NIF.download(NIF.unary(:negate, [2], a, 0, nil), 0, 2)) == [-1, 2]
      # The next submission waits on a semaphore that only the release
      # signals.
      NIF.inject_fault(dev, :hang)
      t0 = System.monotonic_time(:millisecond)
      b = NIF.unary(:negate, [2], a, 0, nil)
      error = assert_raise Nx.Vulkan.Error, fn -> NIF.download(b, 0, 2) end
      waited = System.monotonic_time(:millisecond) - t0
      assert error.status == :device_lost
      assert error.message =~ "has not completed 300 ms" and error.message =~ "batch_timeout_ms"
      assert waited >= 290 and waited < 3000, "woke after #{waited} ms"
      assert {:device_lost, _} = NIF.device_status(dev)

      assert %Nx.Vulkan.Error{status: :device_lost} = catch_error(NIF.unary(:abs, [2], a, 0, nil))
    end

    test "bad timeouts are refused" do
      assert_refused(:batch_timeout_ms, [-1, 4_294_967_296, :off, 1.5])
    end
  end

  describe "process death" do
    test "a process killed with ops in flight leaks nothing" do
      dev = open()
      base = settled(dev)

      for round <- 1..6 do
        parent = self()

        pid =
          spawn(fn ->
            x = NIF.fill(dev, :f32, 1 <<< 18, <<1.0::float-32-native>>)

            t =
              Enum.reduce(1..400, x, fn _, a ->
                NIF.binary(:add, [1 <<< 18], a, 0, nil, x, 0, nil)
              end)

            send(parent, :queued)
            # Some die waiting on a download, some while queuing more.
            if rem(round, 2) == 0, do: NIF.download(t, 0, 1)
            receive do: (:never -> :ok)
          end)

        assert_receive :queued, 30_000
        ref = Process.monitor(pid)
        Process.exit(pid, :kill)
        assert_receive {:DOWN, ^ref, :process, ^pid, :killed}, 30_000
      end

      # A dead process's references are dropped as the VM cleans it up,
      # which may follow its exit signal by a moment.
      s =
        Enum.reduce_while(1..100, nil, fn _, _ ->
          s = settled(dev)

          if s.pool_live_buffers == base.pool_live_buffers do
            {:halt, s}
          else
            Process.sleep(50)
            {:cont, s}
          end
        end)

      assert s.pool_live_buffers == base.pool_live_buffers
      assert s.pool_bytes_in_use == base.pool_bytes_in_use
      assert s.ops_completed == s.ops_enqueued
      assert NIF.device_status(dev) == :ok
    end
  end
end
