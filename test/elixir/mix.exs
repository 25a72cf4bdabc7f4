# The Elixir tests of tracekit (make test-elixir): a Mix project that
# depends on this tree by path, as an Elixir user's project would.
# TK_SAMPLE=1 runs sample/ instead of test/: a test module with a failing
# test, recorded by :tracekit_exunit (its output is checked by
# test/recorder_test.exs).
defmodule TracekitElixirTests.MixProject do
  use Mix.Project

  def project do
    [
      app: :tracekit_elixir_tests,
      version: "0.1.0",
      elixir: "~> 1.18",
      deps: [{:tracekit, path: "../..", manager: :rebar3}],
      test_paths: if(System.get_env("TK_SAMPLE"), do: ["sample"], else: ["test"]),
      test_pattern: "*_test.exs"
    ]
  end

  def application, do: [extra_applications: [:logger]]
end
