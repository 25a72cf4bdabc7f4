defmodule Tracekit.IexTest do
  # A real iex under a pseudo-terminal (script(1)), typed into: tracekit's
  # lines are in Elixir syntax there by default, and specs may be Elixir's.
  use ExUnit.Case

  @tag timeout: 120_000
  test "in iex, :tracekit.calls(\"Enum.map/2\") prints Elixir lines" do
    script = System.find_executable("script") || flunk("script(1) is needed")
    iex = System.find_executable("iex") || flunk("iex is not on PATH")
    paths = for p <- :code.get_path(), String.contains?(to_string(p), "tracekit"), do: ["-pa ", p, " "]
    cmd = IO.chardata_to_string([iex, " --erl '", paths, "'"])
    port = Port.open({:spawn_executable, script},
                     [:binary, :exit_status, :stderr_to_stdout,
                      args: ["-qfc", cmd, "/dev/null"], env: [{~c"TERM", ~c"dumb"}]])
    try do
      await(port, "", ~r/iex\(1\)> /)
      type(port, ~s|:tracekit.calls("Enum.map/2 -> return", %{max_events: 2}); Enum.map([1, 2], &(&1 * 2))|)
      out = await(port, "", ~r/tracekit: 2 events shown/)
      type(port, ~s|:tracekit.calls("Enum.mapp/2")|)
      out = await(port, out, ~r/iex\(3\)> /)
      type(port, "System.halt()")
      lines = out |> String.replace("\r", "") |> String.split("\n")
      assert Enum.any?(lines, &(&1 =~ ~r/^tracekit: tracing calls to Enum.map\/2 -> return in all processes/))
      assert Enum.any?(lines, &(&1 =~ ~r/\d\d:\d\d:\d\d\.\d{6} #PID<[0-9.]+> Enum\.map\(\[1, 2\], #Function<[^>]*>\)$/))
      assert Enum.any?(lines, &(&1 =~ ~r/\d\d:\d\d:\d\d\.\d{6} #PID<[0-9.]+> Enum\.map\/2 -> \[2, 4\]$/))
      assert out =~ "undefined function Enum.mapp (module Enum has no function mapp)"
    after
      if Port.info(port), do: Port.close(port)
    end
  end

  defp type(port, line), do: Port.command(port, line <> "\n")

  defp await(port, acc, re) do
    if acc =~ re do
      acc
    else
      receive do
        {^port, {:data, data}} -> await(port, acc <> data, re)
        {^port, {:exit_status, s}} -> flunk("iex exited (#{s}): #{acc}")
      after
        30_000 -> flunk("no output matching #{inspect(re)}: #{acc}")
      end
    end
  end
end
