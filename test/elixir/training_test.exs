if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.TrainingTest do
    # Training steps written in plain Nx/defn, run through Nx.Defn.Evaluator
    # with Nx.Vulkan.Backend: losses must match Nx.BinaryBackend step for
    # step, and the steps must not fall back to the host.
    use ExUnit.Case, async: false
    @moduletag :nx

    import Nx.Defn

    defn mlp_predict({w1, b1, w2, b2}, x) do
      x
      |> Nx.dot(w1)
      |> Nx.add(b1)
      |> Nx.max(0.0)
      |> Nx.dot(w2)
      |> Nx.add(b2)
    end

    # Softmax cross-entropy with one-hot labels, averaged over the batch.
    defn mlp_loss(params, x, y) do
      logits = mlp_predict(params, x)
      shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
      log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
      -Nx.sum(y * log_probs) / Nx.axis_size(x, 0)
    end

    defn mlp_step({w1, b1, w2, b2} = params, x, y) do
      {loss, {g1, gb1, g2, gb2}} = value_and_grad(params, &mlp_loss(&1, x, y))
      {loss, {w1 - 0.05 * g1, b1 - 0.05 * gb1, w2 - 0.05 * g2, b2 - 0.05 * gb2}}
    end

    # A small CNN: 3x3 convolution to 4 channels, relu, 2x2 max pooling
    # (whose gradient is window_scatter_max), a dense layer to 10 classes.
    defn cnn_predict({k, kb, w, b}, x) do
      x
      |> Nx.conv(k)
      |> Nx.add(Nx.reshape(kb, {1, :auto, 1, 1}))
      |> Nx.max(0.0)
      |> Nx.window_max({1, 1, 2, 2}, strides: [1, 1, 2, 2])
      |> then(&Nx.reshape(&1, {Nx.axis_size(&1, 0), :auto}))
      |> Nx.dot(w)
      |> Nx.add(b)
    end

    defn cnn_loss(params, x, y) do
      logits = cnn_predict(params, x)
      shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
      log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
      -Nx.sum(y * log_probs) / Nx.axis_size(x, 0)
    end

    defn cnn_step({k, kb, w, b} = params, x, y) do
      {loss, {gk, gkb, gw, gb}} = value_and_grad(params, &cnn_loss(&1, x, y))
      {loss, {k - 0.1 * gk, kb - 0.1 * gkb, w - 0.1 * gw, b - 0.1 * gb}}
    end

    defp init_params(key, sizes) do
      {params, _key} =
        sizes
        |> Enum.chunk_every(2, 1, :discard)
        |> Enum.flat_map_reduce(key, fn [i, o], key ->
          {w, key} = Nx.Random.normal(key, 0.0, 1.0 / :math.sqrt(i), shape: {i, o})
          {[w, Nx.broadcast(0.0, {o})], key}
        end)

      List.to_tuple(params)
    end

    defp to_backend(tuple, backend) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&Nx.backend_copy(&1, backend)) |> List.to_tuple()

    test "MLP training: 50 SGD steps match Nx.BinaryBackend with no host fallback" do
      key = Nx.Random.key(42)
      params = init_params(key, [20, 32, 4])
      {x, _} = Nx.Random.normal(Nx.Random.key(7), shape: {24, 20})
      labels = Nx.iota({24}) |> Nx.remainder(4)
      y = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 4})) |> Nx.as_type(:f32)

      host = Enum.map_reduce(1..50, params, fn _, p -> mlp_step(p, x, y) end)

      Nx.Vulkan.reset_fallbacks()

      {device_losses, _} =
        Nx.Vulkan.with_host_fallback(:raise, fn ->
          vk = Nx.Vulkan.Backend
          p0 = to_backend(params, vk)
          xv = Nx.backend_copy(x, vk)
          yv = Nx.backend_copy(y, vk)

          Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)
          Enum.map_reduce(1..50, p0, fn _, p -> mlp_step(p, xv, yv) end)
        end)

      assert Nx.Vulkan.fallbacks() == %{}
      {host_losses, _} = host

      for {d, h} <- Enum.zip(device_losses, host_losses) do
        assert %Nx.Vulkan.Backend{} = d.data
        assert_in_delta Nx.to_number(d), Nx.to_number(h), 1.0e-4
      end

      # It learned something.
      assert Nx.to_number(List.last(device_losses)) < Nx.to_number(hd(device_losses))
    end

    test "CNN training: conv, relu, max pooling, dense; 50 SGD steps match Nx.BinaryBackend" do
      {k, key} = Nx.Random.normal(Nx.Random.key(3), 0.0, 1.0 / 3, shape: {4, 1, 3, 3})
      {w, _} = Nx.Random.normal(key, 0.0, 0.1, shape: {100, 10})
      params = {k, Nx.broadcast(0.0, {4}), w, Nx.broadcast(0.0, {10})}
      {x, _} = Nx.Random.normal(Nx.Random.key(11), shape: {8, 1, 12, 12})
      labels = Nx.iota({8}) |> Nx.remainder(10)
      y = Nx.equal(Nx.new_axis(labels, 1), Nx.iota({1, 10})) |> Nx.as_type(:f32)

      {host_losses, _} = Enum.map_reduce(1..50, params, fn _, p -> cnn_step(p, x, y) end)

      Nx.Vulkan.reset_fallbacks()

      {device_losses, _} =
        Nx.Vulkan.with_host_fallback(:raise, fn ->
          vk = Nx.Vulkan.Backend
          p0 = to_backend(params, vk)
          xv = Nx.backend_copy(x, vk)
          yv = Nx.backend_copy(y, vk)

          Nx.Defn.default_options(compiler: Nx.Defn.Evaluator)
          Enum.map_reduce(1..50, p0, fn _, p -> cnn_step(p, xv, yv) end)
        end)

      assert Nx.Vulkan.fallbacks() == %{}

      for {d, h} <- Enum.zip(device_losses, host_losses) do
        assert %Nx.Vulkan.Backend{} = d.data
        assert_in_delta Nx.to_number(d), Nx.to_number(h), 1.0e-4
      end

      assert Nx.to_number(List.last(device_losses)) < 0.5 * Nx.to_number(hd(device_losses))
    end
  end
end
