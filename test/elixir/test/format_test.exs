defmodule Tracekit.FormatTest do
  # Lines in Elixir syntax, exactly.
  use ExUnit.Case, async: true

  defmodule State do
    defstruct count: 0, name: nil
  end

  defp pid, do: :erlang.list_to_pid(~c"<0.105.0>")
  defp ref, do: :erlang.list_to_ref(~c"#Ref<0.1.2.98937>")

  defp lines(events, opts \\ %{}) do
    opts = Map.merge(%{syntax: :elixir, short_refs: true, stacks: 8}, opts)
    for {_, line} <- :tracekit_format.events(events, opts), do: IO.chardata_to_string(line)
  end

  test "calls, returns, exceptions, messages" do
    call = {:trace, pid(), :call,
            {MyApp.Server, :handle_call,
             [%{op: :get}, {pid(), [:alias | ref()]}, %State{count: 3}]}}
    ret = {:trace, pid(), :return_from, {MyApp.Server, :handle_call, 3}, {:reply, "blue", ~c"ab"}}
    exc = {:trace, pid(), :exception_from, {:lists, :seq, 2}, {:error, {:badmatch, nil}}}
    send = {:trace, pid(), :send, {[:alias | ref()], :ok}, ref()}
    recv = {:trace, pid(), :receive, {:"$gen_cast", "héllo"}}
    caller = {:trace, pid(), :call, {:lists, :seq, [1, 2]}, {:caller, {:gen_server, :try_handle_call, 4}}}

    assert lines([call, ret, exc, send, recv, caller], %{names: %{pid() => MyApp.Server}}) == [
             ~s|#PID<0.105.0> (MyApp.Server) MyApp.Server.handle_call(%{op: :get}, {#PID<0.105.0>, [:alias \| #Reference<..98937>]}, %Tracekit.FormatTest.State{count: 3, name: nil})|,
             ~s|#PID<0.105.0> (MyApp.Server) MyApp.Server.handle_call/3 -> {:reply, "blue", ~c"ab"}|,
             ~s|#PID<0.105.0> (MyApp.Server) :lists.seq/2 raised error: {:badmatch, nil}|,
             ~s|#PID<0.105.0> (MyApp.Server) ! {[:alias \| #Reference<..98937>], :ok} -> alias #Reference<..98937>|,
             ~s|#PID<0.105.0> (MyApp.Server) << {:"$gen_cast", "héllo"}|,
             ~s|#PID<0.105.0> (MyApp.Server) :lists.seq(1, 2) <- :gen_server.try_handle_call/4|
           ]
  end

  test "Erlang lines stay as they were" do
    call = {:trace, pid(), :call, {:lists, :seq, [1, 2]}}
    assert lines([call], %{syntax: :erlang}) == ["<0.105.0> lists:seq(1, 2)"]
  end

  test "limits: inspect's limit is the depth, its printable_limit the line length" do
    call = {:trace, pid(), :call, {:m, :f, [Enum.to_list(1..100), String.duplicate("a", 300)]}}
    [line] = lines([call], %{depth: 5, line_length: 80})
    assert line == "#PID<0.105.0> :m.f([1, 2, 3, 4, 5, ...], \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..."
  end

  test "a giant struct prints within a bounded time and length" do
    big = %State{count: Map.new(1..1_000_000, &{&1, &1}), name: Enum.to_list(1..1_000_000)}
    {us, [line]} = :timer.tc(fn -> lines([{:trace, pid(), :call, {:m, :f, [big]}}]) end)
    assert String.length(line) <= 240
    assert line =~ "#PID<0.105.0> :m.f(%Tracekit.FormatTest.State{count: %{"
    # Inspect sorts a map it prints whole: a million keys took seconds.
    assert us < 500_000
  end
end
