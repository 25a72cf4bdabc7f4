%% tracekit_export: the term text against the shell's, the float rule of
%% EXPORTS.md against an independent implementation of it, the exports of
%% a traced workload parsed back (slices nest, flows pair, folded weights
%% add up to the time in calls), files against lists, errors.
-module(tracekit_export_tests).

-include_lib("eunit/include/eunit.hrl").
-include_lib("kernel/include/file.hrl").

-export([server/0, work/1, fib/1]).

%%% ---- term text ------------------------------------------------------------------

shell(T) -> unicode:characters_to_binary(io_lib:format("~0tp", [T])).
text(T) -> tracekit_export:term_text(T, node()).

%% Terms on which the exports' text is the shell's own.
same_as_shell_test_() ->
    Terms = [0, -17, 1 bsl 70, 1.0, 0.1, -0.0, 1.0e15, 1.0e-5, 123456.0, 2.5e-323,
             ok, 'Hello', 'hello world', 'a@b', '', 'a;b', 'ü', 'Ä', 'aé', 'maybe', 'else', 'end',
             '\n', 'a\x01', '\x{1F600}', '...',
             [], "abc", "a\"b\\c\n\t", "é", [1, 2, 3], [97, 1], [a | b], [a, b | c], [[]],
             {}, {a, "b", <<"c">>}, <<>>, <<"abc">>, <<"hé"/utf8>>, <<"h", 233>>, <<1, 2, 255>>,
             <<0:3>>, <<1, 2:3>>, <<"x\"y">>, <<"\x{1F600}"/utf8>>,
             self(), make_ref(), hd(erlang:ports()), fun lists:map/2, fun() -> ok end,
             fun(X) -> X end, #{}, #{a => 1}, {'...', <<"ab">>, 1000},
             [{'$gen_call', {self(), [alias | make_ref()]}, {get, k}}]],
    [?_assertEqual(shell(T), text(T)) || T <- Terms].

%% Map keys in term order (the shell's order is the map's own).
map_order_test() ->
    ?assertEqual(<<"#{1 => a,1.0 => b,x => c,\"s\" => d,<<1>> => e}">>,
                 text(#{<<1>> => e, "s" => d, x => c, 1.0 => b, 1 => a})),
    Big = maps:from_list([{I, I} || I <- lists:seq(40, 1, -1)]),
    Expected = iolist_to_binary(["#{", lists:join(",", [[integer_to_list(I), " => ",
                                                          integer_to_list(I)]
                                                         || I <- lists:seq(1, 40)]), "}"]),
    ?assertEqual(Expected, text(Big)).

%% Pids, ports and references of another node carry its name.
remote_test() ->
    P = c:pid(0, 84, 0),
    ?assertEqual(<<"<0.84.0>">>, text(P)),
    ?assertEqual(<<"<", (atom_to_binary(node()))/binary, ".84.0>">>,
                 tracekit_export:term_text(P, 'other@host')).

%% EXPORTS.md 1.2, built from its words: the shortest digits that read
%% back, scientific from 2^53, else the shorter of the two forms,
%% decimal on a tie.
spec_float(F) when F < 0; F == 0, is_float(F) ->
    case <<F/float>> of
        <<1:1, _/bitstring>> -> "-" ++ spec_float(-F);
        _ -> spec_float1(F)
    end;
spec_float(F) ->
    spec_float1(F).

spec_float1(F) when F == 0 -> "0.0";
spec_float1(F) ->
    {Digits, E} = hd([{D, Ex} || N <- lists:seq(1, 17),
                                 {D, Ex} <- [sci(F, N)], reads_back(sci_text(D, Ex), F)]),
    N = length(Digits),
    Dec = if E >= N - 1 -> Digits ++ lists:duplicate(E - (N - 1), $0) ++ ".0";
             E >= 0 -> lists:sublist(Digits, E + 1) ++ "." ++ lists:nthtail(E + 1, Digits);
             true -> "0." ++ lists:duplicate(-E - 1, $0) ++ Digits
          end,
    Sci = sci_text(Digits, E),
    case F >= 9007199254740992.0 orelse length(Sci) < length(Dec) of
        true -> Sci;
        false -> Dec
    end.

reads_back(Text, F) ->
    try list_to_float(Text) == F
    catch error:badarg -> false                 % beyond the largest double
    end.

sci(F, N) ->
    S = float_to_list(F, [{scientific, N - 1}]),
    [Mant, Exp] = string:split(S, "e"),
    Digits = [C || C <- Mant, C =/= $.],
    {string:trim(Digits, trailing, "0") ++ case string:trim(Digits, trailing, "0") of
                                                "" -> "0";
                                                _ -> ""
                                            end, list_to_integer(string:trim(Exp, leading, "+"))}.

sci_text([D], E) -> [D] ++ ".0e" ++ integer_to_list(E);
sci_text([D | Ds], E) -> [D, $. | Ds] ++ "e" ++ integer_to_list(E).

float_rule_test() ->
    rand:seed(exsss, {1, 2, 3}),
    Fixed = [1.0, 100.0, 1000.0, 123456.0, 0.0001, 0.00012, 1.0e-5, 12345.678, 5.0e-324,
             1.7976931348623157e308, 0.1, 1.0e21, -2.5, -0.0, 0.0, 7.568818839226578e16,
             1234567890123456.0, 1.0e16, 9999999999999998.0, 9007199254740990.0,
             9007199254740992.0, 4503599627370497.5],
    Random = [begin <<F/float>> = <<(rand:uniform(1 bsl 62)):64>>, F end || _ <- lists:seq(1, 300)]
        ++ [rand:uniform() * math:pow(10, rand:uniform(40) - 20) || _ <- lists:seq(1, 300)],
    [?assertEqual({F, list_to_binary(spec_float(F))}, {F, text(F)}) || F <- Fixed ++ Random].

%%% ---- JSON ---------------------------------------------------------------------

%% Strings survive a JSON parser whatever their bytes; the clean JSON
%% mapping is what EXPORTS.md 1.7 says.
jsonl_terms_test() ->
    Msgs = [<<"plain">>, <<"q\"b\\s/\n\r\t\b\f\x01\x7f">>, <<"é ✓"/utf8>>, <<255, 0>>,
            true, false, null, 'hello world', 42, 1 bsl 53, -(1 bsl 53) + 1, 1.5, "list",
            {tuple, 1}],
    Me = self(),
    Events = [{trace, Me, 'receive', M} || M <- Msgs],
    Lines = jsonl_lines(Events),
    ?assertEqual(length(Msgs), length(Lines)),
    Got = [maps:get(<<"msg">>, L) || L <- Lines],
    Expected = [#{<<"erl">> => text(M)} || M <- Msgs],
    ?assertEqual(Expected, [maps:with([<<"erl">>], G) || G <- Got]),
    ?assertEqual([<<"plain">>, <<"q\"b\\s/\n\r\t\b\f\x01\x7f">>, <<"é ✓"/utf8>>, none,
                  true, false, <<"null">>, <<"hello world">>, 42, none, -(1 bsl 53) + 1, 1.5,
                  none, none],
                 [maps:get(<<"json">>, G, none) || G <- Got]).

jsonl_lines(Events) ->
    {ok, Bin} = export(jsonl, Events),
    [json:decode(L) || L <- binary:split(Bin, <<"\n">>, [global, trim_all])].

export(Fun, Source) ->
    export(Fun, Source, #{}).

export(Fun, Source, Opts) ->
    File = tmp(atom_to_list(Fun)),
    try
        {ok, _} = tracekit_export:Fun(Source, File, Opts),
        file:read_file(File)
    after
        file:delete(File)
    end.

tmp(Name) ->
    filename:join(os:getenv("TMPDIR", "/tmp"),
                  "tracekit_export_" ++ Name ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))).

%% EXPORTS.md 2: fields in order, time and ts.
jsonl_fields_test() ->
    Me = self(),
    To = c:pid(0, 5, 0),
    Events = [{trace_ts, Me, send, hello, To, {1700, 1, 5}},
              {trace_ts, Me, call, {lists, seq, [1, 2]}, 3, {1700, 1, 9}},
              {trace, Me, return_from, {lists, seq, 2}, [1, 2]},
              {seq_trace, 7, {send, {0, 1}, Me, To, hi}},
              not_an_event],
    {ok, Bin} = export(jsonl, Events),
    Me_ = text(Me),
    ?assertEqual(
       <<"{\"i\":1,\"kind\":\"trace\",\"node\":\"", (atom_to_binary(node()))/binary,
         "\",\"time_us\":0.000,\"ts\":\"{1700,1,5}\",\"ts_ns\":1700000001000005000,\"tag\":\"send\","
         "\"pid\":\"", Me_/binary, "\",\"msg\":{\"erl\":\"hello\",\"json\":\"hello\"},"
         "\"to\":{\"erl\":\"<0.5.0>\"}}\n"
         "{\"i\":2,\"kind\":\"trace\",\"node\":\"", (atom_to_binary(node()))/binary,
         "\",\"time_us\":4.000,\"ts\":\"{1700,1,9}\",\"ts_ns\":1700000001000009000,\"tag\":\"call\","
         "\"pid\":\"", Me_/binary, "\",\"mfa\":\"lists:seq/2\",\"args\":{\"erl\":\"[1,2]\"},"
         "\"rest\":[{\"erl\":\"3\",\"json\":3}]}\n"
         "{\"i\":3,\"kind\":\"trace\",\"node\":\"", (atom_to_binary(node()))/binary,
         "\",\"time_us\":4.000,\"ts\":null,\"tag\":\"return_from\",\"pid\":\"", Me_/binary,
         "\",\"mfa\":\"lists:seq/2\",\"value\":{\"erl\":\"[1,2]\"}}\n"
         "{\"i\":4,\"kind\":\"seq_trace\",\"node\":\"", (atom_to_binary(node()))/binary,
         "\",\"time_us\":4.000,\"ts\":null,\"tag\":\"send\",\"pid\":\"", Me_/binary,
         "\",\"label\":{\"erl\":\"7\",\"json\":7},\"serial\":[0,1],\"from\":{\"erl\":\"", Me_/binary,
         "\"},\"to\":{\"erl\":\"<0.5.0>\"},\"msg\":{\"erl\":\"hi\",\"json\":\"hi\"}}\n"
         "{\"i\":5,\"kind\":\"other\",\"term\":{\"erl\":\"not_an_event\",\"json\":\"not_an_event\"}}\n">>,
       Bin).

%% Without timestamps: one microsecond per event, from 0.
untimed_clock_test() ->
    Me = self(),
    Lines = jsonl_lines([{trace, Me, 'receive', I} || I <- lists:seq(1, 5)]
                        ++ [{trace_ts, Me, 'receive', x, 5000000}, {trace, Me, 'receive', y}]),
    ?assertEqual([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0], [maps:get(<<"time_us">>, L) || L <- Lines]).

%% The exact Chrome output of a small trace (EXPORTS.md 3).
chrome_bytes_test() ->
    A = c:pid(0, 80, 0),
    B = c:pid(0, 81, 0),
    N = atom_to_binary(node()),
    Events = [{trace_ts, A, call, {m, f, [1]}, 1000},
              {trace_ts, A, send, ping, B, 2000},
              {trace_ts, B, 'receive', ping, 3500},
              {trace_ts, B, register, srv, 3600},
              {trace_ts, A, return_from, {m, f, 1}, ok, 4000},
              {trace_ts, A, exit, normal, 5000}],
    {ok, Bin} = export(chrome, Events),
    Expected = iolist_to_binary(
                 ["{\"traceEvents\":[\n",
                  "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"", N, "\"}},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":1}},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"<0.80.0>\"}},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":1}},\n",
                  "{\"ph\":\"B\",\"pid\":1,\"tid\":1,\"ts\":0.000,\"cat\":\"call\",\"name\":\"m:f/1\"},\n",
                  "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"dur\":0.000,\"cat\":\"msg\",\"name\":\"send\",\"args\":{\"msg\":\"ping\",\"to\":\"<0.81.0>\"}},\n",
                  "{\"ph\":\"s\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"cat\":\"msg\",\"name\":\"message\",\"id\":1},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":\"<0.81.0>\"}},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":2,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":2}},\n",
                  "{\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":2.500,\"dur\":0.000,\"cat\":\"msg\",\"name\":\"receive\",\"args\":{\"msg\":\"ping\"}},\n",
                  "{\"ph\":\"f\",\"bp\":\"e\",\"pid\":1,\"tid\":2,\"ts\":2.500,\"cat\":\"msg\",\"name\":\"message\",\"id\":1},\n",
                  "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":2,\"ts\":2.600,\"cat\":\"proc\",\"name\":\"register\",\"args\":{\"name\":\"srv\"}},\n",
                  "{\"ph\":\"M\",\"pid\":1,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":\"<0.81.0> (srv)\"}},\n",
                  "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":3.000,\"cat\":\"call\",\"name\":\"m:f/1\",\"args\":{\"args\":\"[1]\",\"return\":\"ok\"}},\n",
                  "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":1,\"ts\":4.000,\"cat\":\"proc\",\"name\":\"exit\",\"args\":{\"reason\":\"normal\"}}\n",
                  "],\"otherData\":{\"format\":\"tracekit-export\",\"version\":1,\"events\":6,\"time_zero_ns\":1000}}\n"]),
    ?assertEqual(Expected, Bin).

%% The busiest process is the first track (speedscope opens the first by
%% pid and tid), and the busiest node the first pid: their events
%% counted before the export, whatever the order they appear in.
chrome_busiest_first_test() ->
    A = c:pid(0, 80, 0),
    B = c:pid(0, 81, 0),
    Remote = tracekit_test_remote_pid(),
    Events = [{trace_ts, Remote, 'receive', x, 500},
              {trace_ts, A, 'receive', x, 1000}]
        ++ [{trace_ts, B, 'receive', I, 2000 + I} || I <- lists:seq(1, 3)]
        ++ [{trace_ts, A, 'receive', y, 9000}],
    {ok, Bin} = export(chrome, Events),
    #{<<"traceEvents">> := Ts} = json:decode(Bin),
    Tracks = [{P, T, N} || #{<<"ph">> := <<"M">>, <<"name">> := <<"thread_name">>, <<"pid">> := P,
                             <<"tid">> := T, <<"args">> := #{<<"name">> := N}} <- Ts],
    ?assertEqual([{1, 1, <<"<0.81.0>">>}, {1, 2, <<"<0.80.0>">>}, {2, 1, <<"<0.7.0>">>}],
                 lists:sort(Tracks)),
    Sorts = [{P, T, I} || #{<<"ph">> := <<"M">>, <<"name">> := <<"thread_sort_index">>,
                            <<"pid">> := P, <<"tid">> := T, <<"args">> := #{<<"sort_index">> := I}} <- Ts],
    ?assertEqual([{1, 1, 1}, {1, 2, 2}, {2, 1, 1}], lists:sort(Sorts)),
    %% A ring is drained once, both passes over its events.
    {ok, R} = tracekit_ring:new(#{}),
    [ok = tracekit_ring:trace('receive', R, B, I, #{}) || I <- lists:seq(1, 3)],
    ok = tracekit_ring:trace('receive', R, A, x, #{}),
    {ok, FromRing} = export(chrome, R),
    #{<<"traceEvents">> := RTs} = json:decode(FromRing),
    ?assertEqual([{1, <<"<0.81.0>">>}, {2, <<"<0.80.0>">>}],
                 lists:sort([{T, N} || #{<<"ph">> := <<"M">>, <<"name">> := <<"thread_name">>,
                                         <<"tid">> := T, <<"args">> := #{<<"name">> := N}} <- RTs])),
    ok = tracekit_ring:close(R).

%% A call's arguments are a list of terms, never a string: [8] is not
%% "\b", in JSON Lines and in Chrome.
args_are_terms_test() ->
    A = c:pid(0, 80, 0),
    Events = [{trace_ts, A, call, {m, f, [8]}, 1000},
              {trace_ts, A, call, {m, g, "ab"}, 1500},
              {trace_ts, A, call, {m, h, [x | '...']}, 1600},
              {trace_ts, A, return_from, {m, h, 2}, ok, 1700},
              {trace_ts, A, return_from, {m, g, 2}, ok, 1800},
              {trace_ts, A, return_from, {m, f, 1}, ok, 2000}],
    Lines = jsonl_lines(Events),
    ?assertEqual([<<"[8]">>, <<"[97,98]">>, <<"[x|'...']">>],
                 [maps:get(<<"erl">>, maps:get(<<"args">>, L)) || L <- Lines,
                                                                 maps:is_key(<<"args">>, L)]),
    {ok, Bin} = export(chrome, Events),
    #{<<"traceEvents">> := Ts} = json:decode(Bin),
    ?assertEqual([<<"[x|'...']">>, <<"[97,98]">>, <<"[8]">>],
                 [maps:get(<<"args">>, Args) || #{<<"ph">> := <<"E">>, <<"args">> := Args} <- Ts]).

chrome_empty_test() ->
    ?assertEqual({ok, <<"{\"traceEvents\":[\n],\"otherData\":{\"format\":\"tracekit-export\","
                        "\"version\":1,\"events\":0,\"time_zero_ns\":null}}\n">>},
                 export(chrome, [])),
    ?assertEqual({ok, <<>>}, export(folded, [])),
    ?assertEqual({ok, <<>>}, export(jsonl, [])).

%% Folded: stacks weighted by time, sorted, rounding half up, the node
%% first when there are several.
folded_bytes_test() ->
    A = c:pid(0, 80, 0),
    Events = [{trace_ts, A, call, {m, f, []}, 0},
              {trace_ts, A, call, {m, g, [x]}, 1000},
              {trace_ts, A, return_from, {m, g, 1}, ok, 3499},
              {trace_ts, A, 'receive', hi, 3600},
              {trace_ts, A, return_from, {m, f, 0}, ok, 5000},
              {trace_ts, A, call, {m, 'a;b', []}, 6000},
              {trace_ts, A, 'receive', late, 6400}],
    %% f: 1000 + 101 + 1400 ns -> 3 us; g: 2499 ns -> 2 us; 'a;b': 400 ns
    %% rounds to 0 and is left out.
    ?assertEqual({ok, <<"<0.80.0>;m:f/0 3\n<0.80.0>;m:f/0;m:g/1 2\n">>}, export(folded, Events)),
    %% 'a;b' for 1000 ns: its ; becomes _; ' sorts before f.
    Later = lists:droplast(Events) ++ [{trace_ts, A, 'receive', late, 7000}],
    ?assertEqual({ok, <<"<0.80.0>;m:'a_b'/0 1\n<0.80.0>;m:f/0 3\n<0.80.0>;m:f/0;m:g/1 2\n">>},
                 export(folded, Later)),
    %% Two nodes: the node's name first.
    Remote = tracekit_test_remote_pid(),
    Two = Later ++ [{trace_ts, Remote, call, {m, h, []}, 8000}, {trace_ts, Remote, 'receive', x, 10000}],
    {ok, Bin} = export(folded, Two),
    N = atom_to_binary(node()),
    ?assertEqual(<<"nohost@remote;<0.7.0>;m:h/0 2\n", N/binary, ";<0.80.0>;m:'a_b'/0 1\n",
                   N/binary, ";<0.80.0>;m:f/0 3\n", N/binary, ";<0.80.0>;m:f/0;m:g/1 2\n">>, Bin).

%% A pid of node nohost@remote, built from its external format.
tracekit_test_remote_pid() ->
    Node = <<"nohost@remote">>,
    binary_to_term(<<131, 88, 119, (byte_size(Node)), Node/binary, 7:32, 0:32, 1:32>>).

%%% ---- a traced workload -------------------------------------------------------------

server() ->
    receive
        {req, From, N} -> From ! {resp, work(N)}, server();
        stop -> ok
    end.

work(N) -> timer:sleep(2), fib(N).

fib(0) -> 0;
fib(1) -> 1;
fib(N) -> fib(N - 1) + fib(N - 2).

%% Events of a client and a server: calls of work/1 and fib/1 with their
%% returns, messages both ways, scheduling.
workload() ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 22}),
    S = trace:session_create(?MODULE, {tracekit_ring, R}, []),
    Me = self(),
    Srv = spawn(fun server/0),
    try
        1 = trace:process(S, Srv, true, [call, send, 'receive', running, timestamp]),
        1 = trace:process(S, Me, true, [send, 'receive', timestamp]),
        _ = trace:function(S, {?MODULE, work, 1}, [{'_', [], [{return_trace}]}], [local]),
        _ = trace:function(S, {?MODULE, fib, 1}, [{'_', [], [{return_trace}]}], [local]),
        [begin Srv ! {req, Me, 8}, receive {resp, 21} -> ok end end || _ <- lists:seq(1, 4)],
        Srv ! stop,
        timer:sleep(50)
    after
        trace:session_destroy(S)
    end,
    Events = tracekit_ring:drain(R),
    ok = tracekit_ring:close(R),
    {Events, Me, Srv}.

workload_test_() ->
    {timeout, 60, fun() ->
                          {Events, Me, Srv} = workload(),
                          check_chrome(Events, Me, Srv),
                          check_folded(Events, Srv),
                          check_jsonl(Events)
                  end}.

check_chrome(Events, Me, Srv) ->
    {ok, Bin} = export(chrome, Events, #{names => #{Srv => the_server}}),
    #{<<"traceEvents">> := Ts, <<"otherData">> := Other} = json:decode(Bin),
    ?assertEqual(length(Events), maps:get(<<"events">>, Other)),
    %% Tracks: the client and the server, named.
    Names = maps:from_list([{{P, T}, N} || #{<<"ph">> := <<"M">>, <<"name">> := <<"thread_name">>,
                                             <<"pid">> := P, <<"tid">> := T,
                                             <<"args">> := #{<<"name">> := N}} <- Ts]),
    ServerTrack = hd([K || K := N <- Names, N =:= <<(text(Srv))/binary, " (the_server)">>]),
    ?assert(lists:member(text(Me), maps:values(Names))),
    ?assert(maps:is_key(<<(text(Srv))/binary, " (the_server) scheduling">>,
                        maps:from_list([{V, K} || K := V <- Names]))),
    %% Every B/E and X event is on a named track.
    [?assert(maps:is_key({P, T}, Names)) || #{<<"ph">> := Ph, <<"pid">> := P, <<"tid">> := T} <- Ts,
                                            Ph =/= <<"M">>],
    %% Slices nest: per track, each E closes the last open B of the same
    %% name, at a time not before it; nothing stays open.
    Open = lists:foldl(
             fun(#{<<"ph">> := <<"B">>, <<"pid">> := P, <<"tid">> := T, <<"name">> := N,
                   <<"ts">> := Ts0}, Acc) ->
                     maps:update_with({P, T}, fun(L) -> [{N, Ts0} | L] end, [{N, Ts0}], Acc);
                (#{<<"ph">> := <<"E">>, <<"pid">> := P, <<"tid">> := T, <<"name">> := N,
                   <<"ts">> := Ts1}, Acc) ->
                     [{N0, Ts0} | Rest] = maps:get({P, T}, Acc),
                     ?assertEqual(N0, N),
                     ?assert(Ts1 >= Ts0),
                     Acc#{{P, T} := Rest};
                (_, Acc) -> Acc
             end, #{}, Ts),
    ?assertEqual([], lists:append(maps:values(Open))),
    %% B events without args (speedscope names frames by them), E events
    %% of calls with the call's arguments.
    [?assertNot(maps:is_key(<<"args">>, E)) || #{<<"ph">> := <<"B">>} = E <- Ts],
    %% (fib(N) and work(8): [8], not the string "\b" the shell shows.)
    ArgTexts = [<<"[", (integer_to_binary(N))/binary, "]">> || N <- lists:seq(0, 8)],
    [?assert(lists:member(maps:get(<<"args">>, maps:get(<<"args">>, E)), ArgTexts))
     || #{<<"ph">> := <<"E">>, <<"cat">> := <<"call">>} = E <- Ts],
    %% The calls: 4 work/1 and as many fib/1 as fib(8) makes, each once.
    Calls = [N || #{<<"ph">> := <<"B">>, <<"cat">> := <<"call">>, <<"name">> := N} <- Ts],
    ?assertEqual(4, length([C || C <- Calls, C =:= <<"tracekit_export_tests:work/1">>])),
    ?assertEqual(4 * fib_calls(8), length([C || C <- Calls, C =:= <<"tracekit_export_tests:fib/1">>])),
    [?assertEqual(ServerTrack, {P, T})
     || #{<<"ph">> := <<"B">>, <<"cat">> := <<"call">>, <<"pid">> := P, <<"tid">> := T} <- Ts],
    %% Flows: 4 requests, 4 replies and stop, each s paired with one f on
    %% the other track, not earlier.
    Starts = maps:from_list([{Id, E} || #{<<"ph">> := <<"s">>, <<"id">> := Id} = E <- Ts]),
    Finishes = [E || #{<<"ph">> := <<"f">>} = E <- Ts],
    ?assertEqual(9, length(Finishes)),
    ?assertEqual(9, length(lists:usort([Id || #{<<"id">> := Id} <- Finishes]))),
    [begin
         S = maps:get(Id, Starts),
         ?assertNotEqual(maps:get(<<"tid">>, S), maps:get(<<"tid">>, F)),
         ?assert(maps:get(<<"ts">>, F) >= maps:get(<<"ts">>, S))
     end || #{<<"id">> := Id} = F <- Finishes],
    %% Scheduling slices on the server's second track.
    {SP, ST} = ServerTrack,
    Running = [E || #{<<"ph">> := <<"B">>, <<"name">> := <<"running">>} = E <- Ts],
    ?assertNotEqual([], Running),
    [?assertEqual({SP, ST + 1000000}, {P, T}) || #{<<"pid">> := P, <<"tid">> := T} <- Running].

fib_calls(0) -> 1;
fib_calls(1) -> 1;
fib_calls(N) -> 1 + fib_calls(N - 1) + fib_calls(N - 2).

%% The weights of the server add up to the time inside work/1, which the
%% events say: each call to its return.
check_folded(Events, Srv) ->
    {ok, Bin} = export(folded, Events),
    Lines = [string:split(L, " ", trailing) || L <- binary:split(Bin, <<"\n">>, [global, trim_all])],
    ?assertEqual(lists:sort(Lines), Lines),
    Sum = lists:sum([binary_to_integer(W) || [_, W] <- Lines]),
    [?assertMatch(<<"<", _/binary>>, S) || [S, _] <- Lines],
    Server = text(Srv),
    Prefix = <<Server/binary, ";tracekit_export_tests:work/1">>,
    [?assertEqual(Prefix, binary:part(S, 0, byte_size(Prefix))) || [S, _] <- Lines],
    Ts = fun(E) -> {M, Se, U} = element(tuple_size(E), E), (M * 1000000 + Se) * 1000000 + U end,
    Calls = [Ts(E) || E <- Events, element(3, E) =:= call,
                      element(1, element(4, E)) =:= tracekit_export_tests, element(2, element(4, E)) =:= work],
    Returns = [Ts(E) || E <- Events, element(3, E) =:= return_from, element(4, E) =:= {?MODULE, work, 1}],
    ?assertEqual(4, length(Calls)),
    Inside = lists:sum([R - C || {C, R} <- lists:zip(Calls, Returns)]),
    ?assert(Inside >= 8000),                    % 4 sleeps of 2 ms
    ?assert(abs(Sum - Inside) =< length(Lines), {Sum, Inside, length(Lines)}).

check_jsonl(Events) ->
    Lines = jsonl_lines(Events),
    ?assertEqual(length(Events), length(Lines)),
    ?assertEqual(lists:seq(1, length(Events)), [maps:get(<<"i">>, L) || L <- Lines]),
    Tags = [binary_to_atom(maps:get(<<"tag">>, L)) || L <- Lines],
    ?assertEqual([element(3, E) || E <- Events], Tags),
    Times = [maps:get(<<"time_us">>, L) || L <- Lines],
    ?assertEqual(0.0, hd(Times)),
    ?assertEqual(lists:sort(Times), Times).

%%% ---- trace files -------------------------------------------------------------------

%% A trace file gives the bytes its events give as a list, for all three
%% exports, to a file or to an io device.
file_source_test_() ->
    {timeout, 60,
     fun() ->
             Path = tmp("trace"),
             {ok, F} = tracekit_file:new(#{path => Path}),
             S = trace:session_create(?MODULE, {tracekit_file, F}, []),
             Me = self(),
             Srv = spawn(fun server/0),
             1 = trace:process(S, Srv, true, [call, send, 'receive', timestamp]),
             _ = trace:function(S, {?MODULE, fib, 1}, [{'_', [], [{return_trace}]}], [local]),
             [begin Srv ! {req, Me, 5}, receive {resp, _} -> ok end end || _ <- lists:seq(1, 3)],
             Srv ! stop,
             timer:sleep(20),
             trace:session_destroy(S),
             ok = tracekit_file:close(F),
             {ok, Events} = tracekit_file:read(Path),
             ?assert(length(Events) > 50),
             try
                 [?assertEqual(export(Fun, Events), export(Fun, Path)) || Fun <- [chrome, jsonl, folded]],
                 Out = tmp("io"),
                 {ok, Dev} = file:open(Out, [write, {encoding, utf8}]),
                 ?assertMatch({ok, _}, tracekit_export:chrome([Path], Dev)),
                 ok = file:close(Dev),
                 ?assertEqual(export(chrome, Events), file:read_file(Out)),
                 file:delete(Out)
             after
                 file:delete(Path)
             end
     end}.

%% A damaged file: a complete document of what could be read, then the
%% error.
damaged_file_test() ->
    Path = tmp("damaged"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    [tracekit_file:trace('receive', F, self(), {msg, I}, #{}) || I <- lists:seq(1, 100)],
    ok = tracekit_file:close(F),
    {ok, Bin} = file:read_file(Path),
    ok = file:write_file(Path, binary:part(Bin, 0, byte_size(Bin) - 20)),
    Out = tmp("damaged_out"),
    try
        ?assertMatch({error, {corrupt, _, _}}, tracekit_export:chrome(Path, Out)),
        {ok, Json} = file:read_file(Out),
        ?assertMatch(#{<<"traceEvents">> := [_ | _]}, json:decode(Json))
    after
        file:delete(Path),
        file:delete(Out)
    end.

errors_test() ->
    Missing = tmp("missing"),
    Out = tmp("x"),
    ?assertEqual({error, {no_files, Missing}}, tracekit_export:chrome(Missing, Out)),
    ?assertNot(filelib:is_file(Out)),
    ?assertMatch({error, {file, "/nonexistent/dir/out.json", enoent}},
                 tracekit_export:chrome([], "/nonexistent/dir/out.json")),
    Y = tmp("y"),
    ?assertEqual({error, {bad_source, [3, {x}]}}, tracekit_export:folded([3, {x}], Y)),
    ?assertNot(filelib:is_file(Y)),
    %% An improper list, and a term that is no ring: refused, and a file of
    %% the name left as it was, nothing beside it.
    Improper = [{trace_ts, self(), call, {m, f, []}, {1, 2, 3}} | tail],
    Dir = tmp("dir"),
    ok = file:make_dir(Dir),
    Kept = filename:join(Dir, "kept"),
    ok = file:write_file(Kept, <<"kept">>),
    [?assertEqual({error, {bad_source, Bad}}, tracekit_export:F(Bad, Kept))
     || F <- [chrome, jsonl, folded], Bad <- [Improper, [3 | 4], make_ref(), 42]],
    %% Nor do files that are not there or not traces.
    NotTrace = filename:join(Dir, "not_a_trace"),
    ok = file:write_file(NotTrace, <<"not a trace file at all">>),
    Gone = filename:join(Dir, "gone"),
    Empty = filename:join(Dir, "empty"),   % damaged before its first event
    ok = file:write_file(Empty, <<>>),
    [?assertMatch({error, _}, tracekit_export:F(Src, Kept))
     || F <- [chrome, jsonl, folded], Src <- [Gone, [Gone], NotTrace, [NotTrace, Gone], Empty]],
    ?assertMatch({error, {corrupt, _, 0}}, tracekit_export:jsonl(Empty, Kept)),
    ok = file:delete(Empty),
    ?assertEqual({error, {no_files, Gone}}, tracekit_export:jsonl(Gone, Kept)),
    ?assertEqual({error, {file, NotTrace, not_a_trace}}, tracekit_export:folded(NotTrace, Kept)),
    ok = file:delete(NotTrace),
    ?assertEqual({ok, <<"kept">>}, file:read_file(Kept)),
    ?assertEqual({ok, ["kept"]}, file:list_dir(Dir)),
    ok = file:delete(Kept),
    ok = file:del_dir(Dir),
    ?assertEqual({error, {bad_dest, {not_a, dest}}}, tracekit_export:folded([], {not_a, dest})),
    %% Empty names are no names; a deep list is one (file:name_all()).
    [?assertMatch({error, {bad_dest, _}}, tracekit_export:jsonl([], D))
     || D <- ['', <<>>, [], [[], []], [1 | 2], [-1], [self()]]],
    Deep = tmp("deep"),
    DeepName = [filename:dirname(Deep), ["/", [list_to_atom(filename:basename(Deep))]]],
    ?assertEqual({ok, 0}, tracekit_export:jsonl([], DeepName)),
    ?assert(filelib:is_regular(Deep)),
    ok = file:delete(Deep),
    %% Descriptors of other modules than raw files' (one naming `file'
    %% looped for ever), and a raw file of another process.
    [?assertEqual({error, {bad_dest, D}}, tracekit_export:jsonl([], D))
     || D <- [{file_descriptor, file, x}, {file_descriptor, nosuchmod, x}]],
    Raw = tmp("raw"),
    Self = self(),
    Opener = spawn(fun() -> {ok, Fd} = file:open(Raw, [write, raw]), Self ! {fd, Fd},
                            receive stop -> file:close(Fd) end end),
    Fd = receive {fd, F} -> F end,
    ?assertMatch({error, {write, not_on_controlling_process}},
                 tracekit_export:jsonl([{trace_ts, Self, call, {m, f, []}, {1, 2, 3}}], Fd)),
    Opener ! stop,
    ok = file:delete(Raw),
    %% Raw files of every kind file:open/2 makes are written.
    Event = {trace_ts, Self, call, {m, f, []}, {1, 2, 3}},
    [begin
         {ok, RawFd} = file:open(Raw, [write, raw | Mode]),
         ?assertEqual({ok, 1}, tracekit_export:jsonl([Event], RawFd)),
         ok = file:close(RawFd),
         {ok, Written} = file:read_file(Raw),
         Text = case Mode of [compressed] -> zlib:gunzip(Written); _ -> Written end,
         ?assertMatch(<<"{", _/binary>>, Text),
         ok = file:delete(Raw)
     end || Mode <- [[], [delayed_write], [compressed], [read]]],
    ?assertEqual({error, {bad_option, {colour, red}}}, tracekit_export:chrome([], tmp("z"), #{colour => red})),
    ?assertEqual({error, {bad_source, 42}}, tracekit_export:chrome(42, standard_io)).

%% An export holds message contents: written 0600, never through a link
%% planted at its name, an old file of the name replaced, nothing left
%% beside it.
private_output_test() ->
    Dir = tmp("private"),
    ok = file:make_dir(Dir),
    Victim = filename:join(Dir, "victim"),
    Out = filename:join(Dir, "out.jsonl"),
    Events = [{trace, self(), 'receive', {secret, I}} || I <- lists:seq(1, 3)],
    try
        ok = file:write_file(Victim, <<"untouched">>),
        ok = file:make_symlink(Victim, Out),
        {ok, 3} = tracekit_export:jsonl(Events, Out),
        ?assertEqual({ok, <<"untouched">>}, file:read_file(Victim)),
        {ok, #file_info{type = regular, mode = Mode}} = file:read_link_info(Out),
        ?assertEqual(8#600, Mode band 8#777),
        ?assertEqual(3, length(binary:split(element(2, file:read_file(Out)), <<"\n">>,
                                            [global, trim_all]))),
        %% An old export of the name is replaced.
        {ok, 1} = tracekit_export:jsonl(tl(tl(Events)), Out),
        ?assertEqual(1, length(binary:split(element(2, file:read_file(Out)), <<"\n">>,
                                            [global, trim_all]))),
        ?assertMatch({ok, _}, tracekit_report:write(Events, Out, #{})),
        {ok, #file_info{mode = Mode2}} = file:read_link_info(Out),
        ?assertEqual(8#600, Mode2 band 8#777),
        %% A directory of the name is left alone.
        ?assertEqual({error, {file, Dir, eisdir}}, tracekit_export:jsonl(Events, Dir)),
        ?assertEqual(lists:sort(["out.jsonl", "victim"]), lists:sort(element(2, file:list_dir(Dir))))
    after
        file:del_dir_r(Dir)
    end.

%% latency_svg/2 to a file name: the drawing of the functions measured,
%% written 0600 as the other exports.
latency_svg_file_test() ->
    Self = self(),
    P = spawn(fun() -> receive go -> ok end, [lists:seq(1, N) || N <- lists:seq(1, 50)],
                       Self ! {done, self()} end),
    {ok, T} = tracekit:latency("lists:seq/2", #{print => false, max_time => infinity,
                                                processes => [P]}),
    P ! go,
    receive {done, P} -> ok end,
    {ok, #{histograms := H}} = tracekit:stop(T),
    Out = tmp("latency") ++ ".svg",
    try
        ?assertEqual({ok, 1}, tracekit_export:latency_svg(H, Out)),
        {ok, Svg} = file:read_file(Out),
        ?assertMatch({match, _}, re:run(Svg, "<svg")),
        ?assertMatch({match, _}, re:run(Svg, "lists:seq/2")),
        {ok, #file_info{mode = Mode}} = file:read_file_info(Out),
        ?assertEqual(8#600, Mode band 8#777),
        ?assertMatch({error, {file, _, enoent}},
                     tracekit_export:latency_svg(H, "/nonexistent/dir/l.svg"))
    after
        file:delete(Out)
    end.

%% At most 65536 sends wait for their receive: the oldest are forgotten.
pending_bound_test_() ->
    {timeout, 60,
     fun() ->
             A = c:pid(0, 80, 0),
             B = c:pid(0, 81, 0),
             N = 65536 + 10,
             Events = [{trace, A, send, {m, I}, B} || I <- lists:seq(1, N)]
                 ++ [{trace, B, 'receive', {m, 1}}, {trace, B, 'receive', {m, 10}},
                     {trace, B, 'receive', {m, 11}}, {trace, B, 'receive', {m, N}}],
             {ok, Bin} = export(chrome, Events),
             #{<<"traceEvents">> := Ts} = json:decode(Bin),
             ?assertEqual([11, N], [Id || #{<<"ph">> := <<"f">>, <<"id">> := Id} <- Ts])
     end}.

%%% ---- any terms -----------------------------------------------------------------------

%% Events of every shape, and terms that are none (what anyone may pass;
%% a list is taken for events when it begins with a tuple): every export
%% is whole (JSON that parses, a line per term, folded
%% lines of a stack and a weight) and the report a page that parses as
%% XML with a row per term.
any_terms_test_() ->
    {timeout, 120,
     fun() ->
             [begin
                  rand:seed(exsss, {Seed, 5, 7}),
                  Terms = [{trace, self(), 'receive', first}
                           | [any_event() || _ <- lists:seq(1, 1499)]],
                  {ok, C} = export(chrome, Terms),
                  #{<<"traceEvents">> := _, <<"otherData">> := #{<<"events">> := 1500}} =
                      json:decode(C),
                  {ok, J} = export(jsonl, Terms),
                  JL = binary:split(J, <<"\n">>, [global, trim]),
                  ?assertEqual(lists:seq(1, 1500), [maps:get(<<"i">>, json:decode(L)) || L <- JL]),
                  {ok, F} = export(folded, Terms),
                  [?assertMatch({match, _}, re:run(L, "^.+ [0-9]+$", [unicode]))
                   || L <- binary:split(F, <<"\n">>, [global, trim])],
                  {ok, Html, #{rows := 1500}} = tracekit_report:html(Terms, #{}),
                  {Doc, []} = xmerl_scan:string(binary_to_list(Html), [{quiet, true}]),
                  ?assertEqual(1500, length(xmerl_xpath:string("//table[@id='event-table']/tbody/tr",
                                                               Doc)))
              end || Seed <- lists:seq(1, 4)]
     end}.

any_event() ->
    P = case rand:uniform(5) of
            1 -> hd(erlang:ports());
            2 -> any_term(1);
            _ -> c:pid(0, 80 + rand:uniform(5), 0)
        end,
    Tag = lists:nth(rand:uniform(24), [send, 'receive', call, return_from, exception_from,
                                       return_to, spawn, spawned, exit, link, unlink, register,
                                       in, out, out_exited, gc_minor_start, gc_minor_end,
                                       gc_major_start, open, closed, odd_tag, 'quoted tag',
                                       send_to_non_existing_process, getting_linked]),
    Term = case rand:uniform(4) of
               1 -> {lists:nth(rand:uniform(3), [m, 'M', 42]), f,
                     lists:nth(rand:uniform(4), [any_term(2), [8], 2, '...'])};
               _ -> any_term(3)
           end,
    Ts = lists:nth(rand:uniform(5), [{1, rand:uniform(1000000), rand:uniform(999999)},
                                     rand:uniform(1 bsl 40), {rand:uniform(100), 3},
                                     any_term(1), -5]),
    Rest = [any_term(2) || _ <- lists:seq(1, rand:uniform(3) - 1)],
    case rand:uniform(8) of
        1 -> list_to_tuple([trace, P, Tag, Term | Rest]);
        2 -> {seq_trace, any_term(1), {lists:nth(rand:uniform(3), [send, 'receive', print]),
                                       {rand:uniform(9), rand:uniform(9)}, P, P, any_term(2)}};
        3 -> {seq_trace, any_term(1), any_term(2), Ts};
        4 -> any_term(3);
        5 -> {trace, P};
        _ -> list_to_tuple([trace_ts, P, Tag, Term | Rest] ++ [Ts])
    end.

any_term(0) -> lists:nth(rand:uniform(4), [0, a, <<>>, []]);
any_term(D) ->
    case rand:uniform(14) of
        1 -> rand:uniform(1 bsl 80) - (1 bsl 79);
        2 -> rand:uniform() * 1.0e10;
        3 -> lists:nth(rand:uniform(6), ['', 'a b', '\n', 'é', '<b>', "\"}"]);
        4 -> list_to_binary([rand:uniform(256) - 1 || _ <- lists:seq(1, rand:uniform(9))]);
        5 -> [rand:uniform(300) || _ <- lists:seq(1, rand:uniform(4))];
        6 -> list_to_tuple([any_term(D - 1) || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        7 -> [any_term(D - 1) | any_term(D - 1)];
        8 -> maps:from_list([{any_term(D - 1), any_term(D - 1)} || _ <- lists:seq(1, rand:uniform(3))]);
        9 -> make_ref();
        10 -> fun() -> D end;
        11 -> <<1:3>>;
        12 -> {'$gen_call', {self(), [alias | make_ref()]}, any_term(D - 1)};
        13 -> {[alias | make_ref()], any_term(D - 1)};
        14 -> "text\n\t\"<&>"
    end.
