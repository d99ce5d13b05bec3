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
      # Whether Nx is present decides what lib/ compiles to (the backend is
      # compiled only with Nx), so the two builds must not share artifacts.
      build_path: if(nx_source() == :none, do: "_build/without_nx", else: "_build"),
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
  defp nx_source do
    cond do
      System.get_env("NX_PATH") not in [nil, ""] -> :path
      Code.ensure_loaded?(Hex) and System.get_env("NX_VULKAN_WITHOUT_NX") in [nil, ""] -> :hex
      true -> :none
    end
  end

  defp deps do
    if nx_source() == :path and not Code.ensure_loaded?(Hex) do
      # Offline: Nx's own Hex dependencies resolve to *_PATH checkouts.
      Mix.SCM.prepend(NxVulkan.OfflineSCM)
    end

    path_dep = fn app, var ->
      case System.get_env(var) do
        nil -> []
        "" -> []
        path -> [{app, path: path, override: true}]
      end
    end

    case nx_source() do
      :path ->
        [{:nx, path: System.get_env("NX_PATH")}] ++
          path_dep.(:complex, "COMPLEX_PATH") ++ path_dep.(:telemetry, "TELEMETRY_PATH")

      :hex ->
        [{:nx, "~> 0.7"}]

      :none ->
        []
    end
  end
end

defmodule NxVulkan.OfflineSCM do
  @moduledoc """
  Resolves Hex-style dependencies (`{:complex, "~> 0.5"}`) of a local Nx
  checkout on machines without Hex: the dependency `:app` is taken from the
  path in the environment variable `APP_PATH` (e.g. `COMPLEX_PATH`).
  Everything else is Mix's path SCM.
  """
  @behaviour Mix.SCM

  defp env_path(app), do: System.get_env(String.upcase("#{app}_PATH"))

  @impl true
  def fetchable?, do: false

  @impl true
  def format(opts), do: Mix.SCM.Path.format(opts)

  @impl true
  def format_lock(opts), do: Mix.SCM.Path.format_lock(opts)

  @impl true
  def accepts_options(app, opts) do
    path = env_path(app)
    hex_style? = not Keyword.has_key?(opts, :path) and not Keyword.has_key?(opts, :git)
    only = opts[:only]

    cond do
      not hex_style? ->
        nil

      path not in [nil, ""] ->
        Mix.SCM.Path.accepts_options(app, Keyword.put(opts, :path, path))

      # A dependency of another environment only (ex_doc for :docs): Mix
      # drops it after resolution, it just needs a well-formed source.
      only != nil and Mix.env() not in List.wrap(only) ->
        unused = Path.join(System.tmp_dir!(), "nx_vulkan_unused_#{app}")
        Mix.SCM.Path.accepts_options(app, Keyword.put(opts, :path, unused))

      true ->
        nil
    end
  end

  @impl true
  def checked_out?(opts), do: Mix.SCM.Path.checked_out?(opts)
  @impl true
  def lock_status(opts), do: Mix.SCM.Path.lock_status(opts)
  @impl true
  def equal?(opts1, opts2), do: Mix.SCM.Path.equal?(opts1, opts2)
  @impl true
  def managers(opts), do: Mix.SCM.Path.managers(opts)
  @impl true
  def checkout(opts), do: Mix.SCM.Path.checkout(opts)
  @impl true
  def update(opts), do: Mix.SCM.Path.update(opts)
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
