defmodule Nx.Vulkan.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    :ok = Nx.Vulkan.Fallback.init()
    :ok = Nx.Vulkan.Scalars.init()

    Supervisor.start_link([Nx.Vulkan.Telemetry],
      strategy: :one_for_one,
      name: Nx.Vulkan.Supervisor
    )
  end
end
