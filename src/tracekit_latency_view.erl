%% @private
%% @doc What a latency trace shows: the nodes' histograms merged exactly
%% (per function: the buckets added, never the percentiles averaged), the
%% table the shell prints every second (one line per function: count,
%% calls/s, p50, p90, p99, max, total; sorted by total time; per node too
%% on request), and the summary a trace returns.
-module(tracekit_latency_view).

-export([merge/1, by_node/1, table/2, lines/2, summary/2, summary_line/1, duration/1]).

-export_type([functions/0, view/0]).

-type functions() :: #{mfa() => tracekit_latency:function_latency()}.
%% What a table shows: the merged functions, the nodes' own (with
%% `per_node'), and the counts at the previous table for calls/s.
-type view() :: #{functions := functions(),
                  nodes := #{node() => functions()},
                  counters := map(),
                  seconds := number(),
                  previous := #{mfa() => non_neg_integer()},
                  interval := number(),
                  left_out => [node()]}.

%% @doc The nodes' histograms merged exactly, and their counters added
%% up. Snapshots of another histogram layout than this node's, or not
%% well formed, are left out, and named.
-spec merge(#{node() => tracekit_latency:snapshot()}) ->
          {functions(), map(), [node()]}.
merge(Snapshots) ->
    #{version := Layout} = tracekit_latency:layout(),
    {Good, Other} = lists:partition(fun({_, S}) -> usable(S, Layout) end,
                                    lists:sort(maps:to_list(Snapshots))),
    Fns = lists:foldl(fun({_, #{functions := F}}, Acc) ->
                              maps:fold(fun(MFA, L, A) ->
                                                maps:update_with(
                                                  MFA, fun(Old) ->
                                                               tracekit_hist:merge_latency(Old, L)
                                                       end, L, A)
                                        end, Acc, F)
                      end, #{}, Good),
    Counters = lists:foldl(fun({_, #{counters := C}}, Acc) ->
                                   maps:fold(fun(K, V, A) when is_integer(V) ->
                                                     maps:update_with(K, fun(X) -> X + V end,
                                                                      V, A);
                                                (_, _, A) -> A
                                             end, Acc, C)
                           end, #{}, Good),
    {Fns, Counters, [N || {N, _} <- Other]}.

%% A snapshot of this node's layout whose histograms are well formed
%% (another node's answer is data like any other).
usable(#{layout := Layout, functions := Fns, counters := C}, Layout)
  when is_map(Fns), is_map(C) ->
    lists:all(fun({{M, F, A}, #{returns := R, exceptions := E, unfinished := U, nested := N}})
                    when is_atom(M), is_atom(F), is_integer(A), is_integer(U), is_integer(N) ->
                      tracekit_hist:check(R) =:= ok andalso tracekit_hist:check(E) =:= ok;
                 (_) ->
                      false
              end, maps:to_list(Fns));
usable(_, _) ->
    false.

%% @doc Each node's functions, as merge/1 takes them.
-spec by_node(#{node() => tracekit_latency:snapshot()}) -> #{node() => functions()}.
by_node(Snapshots) ->
    #{version := Layout} = tracekit_latency:layout(),
    maps:map(fun(_, #{functions := F}) -> F end,
             maps:filter(fun(_, S) -> usable(S, Layout) end, Snapshots)).

%%% The table ------------------------------------------------------------------

%% @doc The table: a title, a header, then one line per function (at
%% most `lines' of them, by total time, or with `sort => max' by their
%% slowest call), with `per_node' a line per node under each function.
%% Options: `lines' (default 20), `per_node' (default false), `sort'.
-spec table(view(), map()) -> iolist().
table(#{functions := Fns, seconds := Secs} = V, Opts) ->
    Max = maps:get(lines, Opts, 20),
    Title = io_lib:format("tracekit: latency after ~.1f s: ~w ~ts~ts",
                          [Secs * 1.0, map_size(Fns),
                           plural(map_size(Fns), "function", "functions"),
                           case map_size(Fns) > Max of
                               true -> io_lib:format(" (the ~w with the most time shown)", [Max]);
                               false -> ""
                           end]),
    [Title, $\n | lines(V, Opts)].

%% @doc The table without its title.
-spec lines(view(), map()) -> iolist().
lines(#{functions := Fns} = V, Opts) ->
    Max = maps:get(lines, Opts, 20),
    Key = case maps:get(sort, Opts, total) of
              total -> fun(#{returns := #{sum := S}}) -> S end;
              max -> fun(#{returns := #{max := M1}, exceptions := #{max := M2}}) -> max(M1, M2) end
          end,
    Rows = lists:sort(fun({_, A}, {_, B}) -> Key(A) >= Key(B) end, maps:to_list(Fns)),
    Shown = lists:sublist(Rows, Max),
    PerNode = maps:get(per_node, Opts, false),
    NameW = lists:max([length("function") | [length(mfa(M)) || {M, _} <- Shown]]
                      ++ [2 + length(atom_to_list(N)) || PerNode,
                                                        N <- maps:keys(maps:get(nodes, V, #{}))])
        + 2,
    Head = io_lib:format("~-*ts~10s ~9s ~9s ~9s ~9s ~9s ~9s", [NameW, "function", "count",
                                                              "calls/s", "p50", "p90", "p99",
                                                              "max", "total"]),
    [Head, $\n
     | [[row(mfa(MFA), NameW, L, rate(MFA, L, V)),
         [[row("  " ++ atom_to_list(Node), NameW, NL, "")
           || {Node, NFns} <- lists:sort(maps:to_list(maps:get(nodes, V, #{}))),
              NL <- [maps:get(MFA, NFns, none)], NL =/= none]
          || PerNode]]
        || {MFA, L} <- Shown]].

row(Name, W, L, Rate) ->
    #{count := N, p50 := P50, p90 := P90, p99 := P99, max := Max, total := T,
      exceptions := E} = tracekit_hist:summary(L),
    D = fun(_) when N =:= 0 -> "-"; (Us) -> duration(Us) end,
    [io_lib:format("~-*ts~10w ~9ts ~9ts ~9ts ~9ts ~9ts ~9ts",
                   [W, Name, N, Rate, D(P50), D(P90), D(P99), D(Max), D(T)]),
     case E of
         0 -> "";
         _ -> io_lib:format("  (~w ~ts)", [E, plural(E, "exception", "exceptions")])
     end, $\n].

%% Calls that ended since the previous table, per second.
rate(MFA, #{returns := #{count := R}, exceptions := #{count := E}},
     #{previous := Prev, interval := Dt}) when Dt > 0 ->
    io_lib:format("~.1f", [(R + E - maps:get(MFA, Prev, 0)) / Dt]);
rate(_, _, _) ->
    "".

mfa({M, F, A}) -> lists:flatten(io_lib:format("~tw:~tw/~w", [M, F, A])).

plural(1, One, _) -> One;
plural(_, _, Many) -> Many.

%% @doc A duration in microseconds, in a unit that keeps 3 figures:
%% `850ns', `12.3us', `4.56ms', `1.23s'.
-spec duration(number()) -> string().
duration(Us) when Us < 1 -> lists:flatten(io_lib:format("~wns", [round(Us * 1000)]));
duration(Us) when Us < 1000 -> figures(Us, "us");
duration(Us) when Us < 1000000 -> figures(Us / 1000, "ms");
duration(Us) -> figures(Us / 1000000, "s").

figures(X, Unit) when X < 10 -> lists:flatten(io_lib:format("~.2f~s", [float(X), Unit]));
figures(X, Unit) when X < 100 -> lists:flatten(io_lib:format("~.1f~s", [float(X), Unit]));
figures(X, Unit) -> lists:flatten(io_lib:format("~w~s", [round(X), Unit])).

%%% The summary -------------------------------------------------------------------

%% @doc What a latency trace returns: `latency' (per function, {@link
%% tracekit_hist:summary/1}, microseconds, and `calls_per_second' over the
%% trace), `histograms' (per function, the merged histograms themselves,
%% nanoseconds: for {@link tracekit_hist}, the exports and the report),
%% `counters' (of all nodes), `seconds' traced; with several nodes,
%% `latency_nodes' and `histograms_nodes' (the same per node), and
%% `left_out', the nodes whose histograms could not be merged (another
%% layout, or not well formed), when there are any.
-spec summary(view(), boolean()) -> map().
summary(#{functions := Fns, counters := C, seconds := Secs} = V, Multi) ->
    Per = fun(F) -> maps:map(fun(_, L) -> with_rate(tracekit_hist:summary(L), Secs) end, F) end,
    S0 = #{latency => Per(Fns), histograms => Fns, counters => C, seconds => Secs},
    S = case maps:get(left_out, V, []) of
            [] -> S0;
            Left -> S0#{left_out => Left}
        end,
    case Multi of
        true ->
            Nodes = maps:get(nodes, V, #{}),
            S#{latency_nodes => maps:map(fun(_, F) -> Per(F) end, Nodes),
               histograms_nodes => Nodes};
        false ->
            S
    end.

with_rate(#{count := N, exceptions := E} = S, Secs) when Secs > 0 ->
    S#{calls_per_second => (N + E) / Secs};
with_rate(S, _) ->
    S#{calls_per_second => 0.0}.

%% @doc The last line: what was measured, what was not, and why the
%% trace ended.
-spec summary_line(map()) -> iolist().
summary_line(#{reason := Reason, latency := L, counters := C, seconds := Secs}) ->
    Measured = maps:get(measured, C, 0),
    Unfinished = maps:get(unfinished, C, 0),
    Dropped = maps:get(dropped, C, 0) + maps:get(unplaced, C, 0),
    NotFollowed = maps:get(lost, C, 0) + maps:get(blind, C, 0)
        + maps:get(over_functions, C, 0) + maps:get(over_processes, C, 0)
        + maps:get(over_frames, C, 0),
    io_lib:format("tracekit: ~w ~ts of ~w ~ts measured in ~.1f s, ~w unfinished, "
                  "~w events dropped~ts; ~ts",
                  [Measured, plural(Measured, "call", "calls"), map_size(L),
                   plural(map_size(L), "function", "functions"), Secs * 1.0, Unfinished,
                   Dropped,
                   case NotFollowed of
                       0 -> "";
                       _ -> io_lib:format(", ~w calls not followed (lost, or over the bounds)",
                                          [NotFollowed])
                   end,
                   tracekit_format:reason(Reason)]).
