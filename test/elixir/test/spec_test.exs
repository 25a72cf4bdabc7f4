defmodule Tracekit.SpecTest do
  # Specs in Elixir syntax compile to the match specs written by hand.
  use ExUnit.Case, async: true

  defp ms(spec) do
    {:ok, [call]} = :tracekit_spec.parse(spec)
    {call.module, call.function, call.arity, call.match_spec}
  end

  defp why(spec) do
    {:error, {:bad_spec, _, why}} = :tracekit_spec.resolve(spec)
    IO.chardata_to_string(why)
  end

  test "functions, arities and modules" do
    assert ms("Enum.map/2") == {Enum, :map, 2, [{:_, [], []}]}
    assert ms("Enum.map") == {Enum, :map, :_, [{:_, [], []}]}
    assert ms("MyApp.Server") == {MyApp.Server, :_, :_, [{:_, [], []}]}
    assert ms("MyApp.Server._/3") == {MyApp.Server, :_, 3, [{:_, [], []}]}
    assert ms(":lists.seq/2") == {:lists, :seq, 2, [{:_, [], []}]}
    assert ms(~s|MyApp.Server."weird name"/1|) == {MyApp.Server, :"weird name", 1, [{:_, [], []}]}
  end

  test "patterns, guards and actions" do
    assert ms("MyApp.Server.handle_call(%{op: :get}, _, _) -> return") ==
             {MyApp.Server, :handle_call, 3, [{[%{op: :get}, :_, :_], [], [{:return_trace}]}]}

    assert ms(~s|String.split(s, ",") when is_binary(s)|) ==
             {String, :split, 2, [{[:"$1", ","], [{:is_binary, :"$1"}], []}]}

    assert ms("MyApp.Server.handle_call/3 -> stack") ==
             {MyApp.Server, :handle_call, 3,
              [{:_, [], [{:message, {{:stack, {:current_stacktrace, 9}}}}]}]}

    assert ms("M.f(%MyApp.State{count: n}, [h | _], {:k, n}) when n > 2 and elem(h, 0) == :a") ==
             {M, :f, 3,
              [{[%{__struct__: MyApp.State, count: :"$1"}, [:"$2" | :_], {:k, :"$1"}],
                [{:andalso, {:>, :"$1", 2}, {:==, {:element, 1, :"$2"}, {:const, :a}}}], []}]}

    assert ms("M.f(x) when is_nil(x) when x in 1..3") ==
             {M, :f, 1,
              [{[:"$1"], [{:"=:=", :"$1", {:const, nil}}], []},
               {[:"$1"], [{:andalso, {:is_integer, :"$1"},
                           {:andalso, {:>=, :"$1", 1}, {:"=<", :"$1", 3}}}], []}]}

    assert ms("M.f(m) when m.count > 1 and is_map_key(m, :k) -> return, caller") ==
             {M, :f, 1,
              [{[:"$1"],
                [{:andalso, {:>, {:map_get, {:const, :count}, :"$1"}, 1},
                  {:is_map_key, {:const, :k}, :"$1"}}],
                [{:message, {{:caller, {:caller}}}}, {:return_trace}]}]}
  end

  test "captures and {Module, :function, arity}" do
    assert ms(&Enum.map/2) == {Enum, :map, 2, [{:_, [], []}]}
    assert ms({Enum, :map, 2}) == {Enum, :map, 2, [{:_, [], []}]}
    assert {:ok, [%{text: ~c"&Enum.map/2"}]} = :tracekit_spec.parse(&Enum.map/2)
  end

  test "an Erlang spec means what it meant" do
    assert ms(~c"lists:seq(A, B) when B > A") ==
             {:lists, :seq, 2, [{[:"$1", :"$2"], [{:>, :"$2", :"$1"}], []}]}
  end

  test "errors in Elixir's terms" do
    assert why("Enum.map/3") =~ "undefined function Enum.map/3 (the module has map/2)"
    assert why("Nope.Nothing.f/1") =~ "module Nope.Nothing is not available"
    assert why(Function.capture(Nope.Nothing, :f, 1)) =~ "module Nope.Nothing is not available"
    assert why("M.f(^x)") =~ "^x pins a variable, and a spec has no variable bound before it"
    assert why("M.f(x) when y > 1") =~ "variable y in the guard is not bound"
    assert why("M.f(\"a\" <> r)") =~ "\"prefix\" <> rest cannot be matched"
    assert why("M.f(x) when foo(x)") =~ "foo(x) cannot be used in a guard"
    assert why("M.f(x) -> retrun") =~ "unknown action retrun"
    assert why("Enum.map(") =~ "the spec ends too early"
    assert why(fn x -> x end) =~ "an anonymous function cannot be traced"
    assert why(~c"Elixir.Enum:map/2") =~ "quote a module whose name begins with a capital, 'Elixir.Enum':map/2"
    assert why("Elixir.Enum:map/2") =~ "or write the spec in Elixir syntax, Enum.map/2"
  end

  test "hostile specs give errors, not crashes" do
    deep = String.duplicate("[", 5000) <> String.duplicate("]", 5000)
    assert {:ok, _} = :tracekit_spec.parse("M.f(#{deep})")
    assert why("M.f(" <> String.duplicate("x, ", 30000) <> "x)") =~ "longer than 65536"
    assert why("M.f(%{a: 1, b: %{c: [1, 2 | ^z]}})") =~ "pins a variable"
    assert why("M.f(@attr, __MODULE__)") =~ "module attributes are not known"
    assert why("1 + 2") =~ "expected Module:Function"
  end
end
