defmodule NxVulkan.MixProject do
  use Mix.Project

  @version "0.1.0"

  def project do
    [
      app: :nx_vulkan,
      version: @version,
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      compilers: [:nx_vulkan_nif] ++ Mix.compilers(),
      deps: deps(),
      test_paths: ["test/elixir"],
      elixirc_paths: ["lib"],
      description: "Vulkan GPU backend for Nx, with an asynchronous C runtime",
      docs: [main: "Nx.Vulkan"]
    ]
  end

  def application do
    [extra_applications: [:logger], mod: {Nx.Vulkan.Application, []}]
  end

  # Nx comes from Hex; from a local checkout with NX_PATH=/path/to/nx (the
  # "nx" folder of the Nx repository), with its own dependencies from
  # COMPLEX_PATH and TELEMETRY_PATH when those are set (offline machines);
  # without either, the Nx-independent part builds alone and the Nx tests
  # are skipped.
  defp deps do
    path_dep = fn app, var ->
      case System.get_env(var) do
        nil -> []
        "" -> []
        path -> [{app, path: path, override: true}]
      end
    end

    cond do
      System.get_env("NX_PATH") not in [nil, ""] ->
        [{:nx, path: System.get_env("NX_PATH")}] ++
          path_dep.(:complex, "COMPLEX_PATH") ++ path_dep.(:telemetry, "TELEMETRY_PATH")

      Code.ensure_loaded?(Hex) and System.get_env("NX_VULKAN_WITHOUT_NX") in [nil, ""] ->
        [{:nx, "~> 0.7"}]

      true ->
        []
    end
  end
end

defmodule Mix.Tasks.Compile.NxVulkanNif do
  @moduledoc "Builds the runtime and the NIF (priv/libnx_vulkan_nif.so) with make."
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    make =
      System.get_env("MAKE") || if(match?({:freebsd, _}, :os.type()), do: "gmake", else: "make")

    {output, status} = System.cmd(make, ["-s", "nif"], stderr_to_stdout: true)

    if status == 0 do
      if String.trim(output) != "", do: Mix.shell().info(output)
      {:ok, []}
    else
      Mix.shell().error(output)
      Mix.raise("building the nx_vulkan NIF failed (#{make} nif exited with #{status})")
    end
  end
end
