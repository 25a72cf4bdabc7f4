defmodule Tracekit.RecorderTest do
  # The sample's run (make test-elixir runs it first, TK_SAMPLE=1): its
  # failing test's trace is written and named in the failure's output.
  use ExUnit.Case, async: true

  test "the failing test's files exist and the failure names them" do
    out = File.read!(System.fetch_env!("TK_SAMPLE_OUT"))
    dir = System.fetch_env!("TK_SAMPLE_DIR")
    base = Path.join(dir, "SampleTest.test_fails_to_get_a_key.tracekit")
    assert out =~ "1) test fails to get a key (SampleTest)"
    assert out =~ ~r/tracekit: \d+ events of this test in #{Regex.escape(base)}\.txt \(also \.html, \.messages\.mmd, \.seq\.mmd\)/
    assert out =~ "tracekit_exunit records in each test whose setup calls :tracekit_exunit.record/1"
    # Written private (0600), as trace files are.
    for ext <- ~w(.txt .html .messages.mmd .seq.mmd),
        do: assert(Bitwise.band(File.stat!(base <> ext).mode, 0o177) == 0)
    assert File.ls!(dir) |> Enum.filter(&(&1 =~ "gets_a_key")) == []

    txt = File.read!(base <> ".txt")
    assert txt =~ ~s|tracekit trace of SampleTest "test fails to get a key" (failed)|
    assert txt =~ ~r/\(test\) ! \{:"\$gen_call", \{#PID<[0-9.]+>, \[:alias \| #Reference<\.\.\d+>\]\}, \{:get, :size\}\}/
    assert txt =~ ~r/Sample\.Store\.handle_call\(\{:get, :size\}, .*%Sample\.Store\{count: 1, items: %\{color: "blue"\}\}\)/
    assert txt =~ ~r/Sample\.Store\.handle_call\/3 -> \{:reply, nil, %Sample\.Store\{count: 2/
    assert txt =~ ~r/SampleTest\."test fails to get a key"\/1 raised error: %ExUnit\.AssertionError\{/
    mmd = File.read!(base <> ".messages.mmd")
    assert mmd =~ "call {:get, :size}"
    assert mmd =~ "reply nil"
    assert File.stat!(dir).access == :read_write and Bitwise.band(File.stat!(dir).mode, 0o077) == 0
  end
end
