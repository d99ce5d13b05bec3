defmodule Nx.Vulkan.Fallback do
  @moduledoc """
  Counting and policing host fallbacks.

  An operation the device has no kernel for is computed on the CPU through
  `Nx.BinaryBackend` and the result uploaded. Every such fallback is
  counted per op (`Nx.Vulkan.fallbacks/0`) and subject to a policy:

    * `:allow` (default) - fall back silently;
    * `:warn` - fall back and log a warning naming the op;
    * `:raise` - raise `ArgumentError` naming the op instead.

  The policy is `config :nx_vulkan, :host_fallback, mode`, overridden for
  one process by `Nx.Vulkan.with_host_fallback/2`.
  """
  require Logger

  @table __MODULE__

  @doc false
  def init do
    :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])
    :ok
  end

  @doc "The policy in force for the calling process."
  @spec mode() :: :allow | :warn | :raise
  def mode do
    case Process.get(:nx_vulkan_host_fallback) do
      nil -> Application.get_env(:nx_vulkan, :host_fallback, :allow)
      mode -> mode
    end
  end

  @doc """
  Records a fallback of `op` (an atom, usually the callback name) and
  applies the policy; `detail` says why (for messages). Returns `:ok` or
  raises.
  """
  @spec record!(atom, String.t()) :: :ok
  def record!(op, detail \\ "") when is_atom(op) do
    case mode() do
      :raise ->
        raise ArgumentError,
              "Nx.Vulkan.Backend: #{op} would run on the host (#{detail}) and " <>
                "host fallbacks are disabled (:host_fallback is :raise)"

      :warn ->
        Logger.warning("Nx.Vulkan.Backend: #{op} falls back to the host (#{detail})")

      _ ->
        :ok
    end

    :ets.update_counter(@table, op, {2, 1}, {op, 0})
    Nx.Vulkan.Telemetry.execute([:nx_vulkan, :fallback], %{count: 1}, %{op: op, reason: detail})
    # A replay of captured device calls would not count this fallback.
    Nx.Vulkan.Capture.abort()
  end

  @doc "Fallback counts as `%{op => count}`."
  @spec counts() :: %{atom => non_neg_integer}
  def counts, do: Map.new(:ets.tab2list(@table))

  @doc "Resets every count."
  @spec reset() :: :ok
  def reset do
    :ets.delete_all_objects(@table)
    :ok
  end
end
