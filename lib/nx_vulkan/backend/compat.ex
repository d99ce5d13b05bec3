if Code.ensure_loaded?(Nx.Backend) do
  defmodule Nx.Vulkan.Backend.Compat do
    @moduledoc false
    # Compile-time helpers that let Nx.Vulkan.Backend implement the callbacks
    # of every supported Nx version while compiling cleanly against one.

    @doc """
    Marks the next function definition as the implementation of an
    `Nx.Backend` callback (`@impl true`) when the Nx being compiled against
    declares a callback of that name and arity, and hides its docs
    (`@doc false`) otherwise: it is a callback of another Nx version.
    Works with literal and computed names (inside `for`).
    """
    defmacro impl_if_callback(name, arity) do
      quote do
        if {unquote(name), unquote(arity)} in Nx.Backend.behaviour_info(:callbacks) do
          @impl true
        else
          @doc false
        end
      end
    end
  end
end
