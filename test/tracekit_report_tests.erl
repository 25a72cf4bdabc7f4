%% tracekit_report: the page parses as XML, holds what the events say
%% (rows, arrows, lost messages, serials), is capped, and escapes every
%% text that comes from the events.
-module(tracekit_report_tests).

-include_lib("eunit/include/eunit.hrl").
-include_lib("xmerl/include/xmerl.hrl").

html(Events, Opts) ->
    {ok, Bin, Info} = tracekit_report:html(Events, Opts),
    {Bin, Info}.

parse(Bin) ->
    {Doc, []} = xmerl_scan:string(binary_to_list(Bin), [{quiet, true}]),
    Doc.

xpath(Path, Doc) -> xmerl_xpath:string(Path, Doc).

texts(Node) ->
    lists:flatten([V || #xmlText{value = V} <- xpath(".//text()", Node)]).

rows(Doc) -> xpath("//table[@id='event-table']/tbody/tr", Doc).
arrows(Doc) -> xpath("//svg[@class='sequence']/g[@class='row']", Doc).
arrow_class(#xmlElement{content = Content}) ->
    hd([V || #xmlElement{name = N, attributes = As} <- Content, N =:= line orelse N =:= path,
             #xmlAttribute{name = class, value = V} <- As]).

%% A gen_server call and its reply, a message never received by a traced
%% receiver, a send to no process, a receive from an untraced sender.
messages_test() ->
    C = c:pid(0, 80, 0),
    S = c:pid(0, 81, 0),
    Ref = make_ref(),
    Events = [{trace_ts, C, send, {'$gen_call', {C, [alias | Ref]}, {get, k}}, S, 1000},
              {trace_ts, S, 'receive', {'$gen_call', {C, [alias | Ref]}, {get, k}}, 2000},
              {trace_ts, S, send, {[alias | Ref], 42}, Ref, 3000},
              {trace_ts, C, 'receive', {[alias | Ref], 42}, 4000},
              {trace_ts, C, send, lost_one, S, 5000},
              {trace_ts, C, send_to_non_existing_process, nobody, c:pid(0, 99, 0), 6000},
              {trace_ts, S, 'receive', from_outside, 7000}],
    {Bin, Info} = html(Events, #{names => #{S => srv}}),
    Doc = parse(Bin),
    ?assertMatch(#{events := 7, rows := 7, arrows := 5, rows_left_out := 0}, Info),
    ?assertEqual(7, length(rows(Doc))),
    Arrows = arrows(Doc),
    ?assertEqual(["call {get,k}", "reply 42", "lost_one", "nobody", "from_outside"],
                 [texts(hd(xpath("text", G))) || G <- Arrows]),
    ?assertEqual(["msg", "msg", "msg lost", "msg lost", "msg"], [arrow_class(G) || G <- Arrows]),
    %% A cross (two lines) at the end of each lost message.
    ?assertEqual([0, 0, 2, 2, 0], [length(xpath("line[@class='cross']", G)) || G <- Arrows]),
    %% Participants: the client, the server by name, the dead pid, and
    %% the untraced sender.
    Heads = [texts(T) || T <- xpath("//svg[@class='sequence']/g[@class='head']/text", Doc)],
    ?assertEqual(4, length(Heads)),
    ?assert(lists:any(fun(H) -> string:find(H, "(srv)") =/= nomatch end, Heads)),
    ?assert(lists:any(fun(H) -> string:find(H, "(untraced)") =/= nomatch end, Heads)),
    %% The reply to the alias is drawn back to the client.
    [_, Reply | _] = Arrows,
    [X1, X2] = [list_to_integer(V) || A <- ["x1", "x2"],
                                      #xmlAttribute{value = V} <- xpath("line/@" ++ A, Reply)],
    [Call | _] = Arrows,
    [CX1, CX2] = [list_to_integer(V) || A <- ["x1", "x2"],
                                        #xmlAttribute{value = V} <- xpath("line/@" ++ A, Call)],
    ?assert(X1 > X2),
    ?assert(abs(X2 - CX1) =< 2 andalso abs(X1 - CX2) =< 2).

%% Process trace and seq_trace events of one message make one arrow
%% with the serial on hover.
seq_merge_test() ->
    C = c:pid(0, 80, 0),
    S = c:pid(0, 81, 0),
    Events = [{trace, C, send, ping, S},
              {seq_trace, 5, {send, {0, 1}, C, S, ping}},
              {trace, S, 'receive', ping},
              {seq_trace, 5, {'receive', {0, 1}, C, S, ping}},
              {seq_trace, 5, {send, {1, 2}, S, C, pong}},
              {seq_trace, 5, {'receive', {1, 2}, S, C, pong}}],
    {Bin, _} = html(Events, #{}),
    Arrows = arrows(parse(Bin)),
    ?assertEqual(2, length(Arrows)),
    Titles = [texts(hd(xpath("title", G))) || G <- Arrows],
    ?assertMatch([_, _], [T || T <- Titles, string:find(T, "serial [") =/= nomatch]),
    ?assertNotEqual(nomatch, string:find(hd(Titles), "serial [0,1]")),
    ?assertEqual(["msg", "msg"], [arrow_class(G) || G <- Arrows]).

%% Nothing from the events becomes markup.
escaping_test() ->
    P = c:pid(0, 80, 0),
    Evil = [<<"</text></svg><script>alert(1)</script>">>, '<b onload="x">&amp;',
            "<img src=x onerror=alert(1)>", <<"]]>\x01\x{2028}"/utf8>>, <<0, 1, 2, $<>>,
            {'<script>', "'\"&"}],
    Events = [{trace_ts, P, send, M, list_to_atom("<i>name" ++ integer_to_list(I) ++ "</i>"), I * 1000}
              || {I, M} <- lists:zip(lists:seq(1, length(Evil)), Evil)]
        ++ [{trace_ts, P, register, '<script>x</script>', 9000},
            {trace_ts, P, call, {'<m>', '<f>', [<<"<&>">>]}, 10000},
            {trace_ts, P, return_from, {'<m>', '<f>', 1}, '</rect>', 11000}],
    {Bin, _} = html(Events, #{title => "<title>&", note => "</p><script>"}),
    Doc = parse(Bin),
    ?assertEqual([], xpath("//script", Doc)),
    ?assertEqual([], xpath("//b", Doc)),
    ?assertEqual([], xpath("//img", Doc)),
    ?assertEqual([], xpath("//i", Doc)),
    ?assertEqual(nomatch, binary:match(Bin, [<<"<script">>, <<"<img">>, <<"<b ">>, <<"<i>">>])),
    %% The texts are there, as text.
    All = texts(Doc),
    [?assertNotEqual(nomatch, string:find(All, S))
     || S <- ["alert(1)", "<title>&", "</p><script>", "'<m>':'<f>'/1", "'<script>x</script>'"]],
    ?assertEqual(length(Events), length(rows(Doc))).

%% A huge trace: capped rows, arrows and slices, each with its note.
caps_test() ->
    A = c:pid(0, 80, 0),
    B = c:pid(0, 81, 0),
    Events = lists:append([[{trace_ts, A, call, {m, f, [I]}, I * 10000},
                            {trace_ts, A, send, {n, I}, B, I * 10000 + 1},
                            {trace_ts, B, 'receive', {n, I}, I * 10000 + 2},
                            {trace_ts, A, return_from, {m, f, 1}, ok, I * 10000 + 3}]
                           || I <- lists:seq(1, 3000)]),
    {Bin, Info} = html(Events, #{max_rows => 100, max_arrows => 50, max_slices => 70}),
    ?assertMatch(#{events := 12000, rows := 100, rows_left_out := 11900, arrows := 50,
                   slices := 70, slices_left_out := 2930}, Info),
    Doc = parse(Bin),
    ?assertEqual(100, length(rows(Doc))),
    ?assertEqual(50, length(arrows(Doc))),
    ?assertEqual(70, length(xpath("//svg[@class='timeline']//rect[@class='call']", Doc))),
    Notes = [texts(N) || N <- xpath("//p[@class='cap']", Doc)],
    ?assert(lists:member("11900 more events left out (the table shows the first 100).", Notes)),
    ?assert(lists:any(fun(N) -> lists:prefix("2930 more slices left out", N) end, Notes)),
    ?assert(lists:any(fun(N) -> lists:prefix("2950 more messages left out", N) end, Notes)),
    ?assert(byte_size(Bin) < 200000).

%% The summary: counts by tag, processes, lost.
summary_test() ->
    A = c:pid(0, 80, 0),
    Events = [{trace, A, 'receive', x}, {trace, A, 'receive', y}, {trace, A, exit, normal}],
    {Bin, _} = html(Events, #{lost => 17}),
    Doc = parse(Bin),
    Tags = [{texts(R1), texts(R2)} || Tr <- xpath("//table[@class='tags']/tbody/tr", Doc),
                                     [R1, R2] <- [xpath("td", Tr)]],
    ?assertEqual([{"'receive'", "2"}, {"exit", "1"}], lists:sort(Tags)),
    Summary = [{texts(H), texts(D)} || Tr <- xpath("//table[@class='summary']/tr", Doc),
                                      [H] <- [xpath("th", Tr)], [D] <- [xpath("td", Tr)]],
    ?assertEqual("17", proplists:get_value("lost or dropped", Summary)),
    ?assertEqual("3", proplists:get_value("events", Summary)),
    ?assertEqual("1", proplists:get_value("processes", Summary)).

%% The timeline: nested call bars and scheduling.
timeline_test() ->
    A = c:pid(0, 80, 0),
    Events = [{trace_ts, A, in, {m, f, 0}, 0},
              {trace_ts, A, call, {m, f, []}, 1000},
              {trace_ts, A, call, {m, g, [1]}, 2000},
              {trace_ts, A, return_from, {m, g, 1}, ok, 3000},
              {trace_ts, A, return_from, {m, f, 0}, ok, 4000},
              {trace_ts, A, out, {m, f, 0}, 5000}],
    {Bin, Info} = html(Events, #{}),
    ?assertMatch(#{slices := 3}, Info),
    Doc = parse(Bin),
    Calls = xpath("//svg[@class='timeline']//rect[@class='call']", Doc),
    Ys = [list_to_integer(V) || R <- Calls, #xmlAttribute{value = V} <- xpath("@y", R)],
    Titles = [texts(R) || R <- Calls],
    ?assertEqual(["m:f/0 3.000 µs", "m:g/1 1.000 µs"], lists:sort(Titles)),
    %% g is drawn below f.
    [{_, FY}, {_, GY}] = lists:sort(lists:zip(Titles, Ys)),
    ?assert(GY > FY),
    ?assertEqual(1, length(xpath("//svg[@class='timeline']//rect[@class='run']", Doc))).

%% Sources and errors.
sources_test() ->
    Path = filename:join(os:getenv("TMPDIR", "/tmp"),
                         "tracekit_report_" ++ integer_to_list(erlang:unique_integer([positive]))),
    {ok, F} = tracekit_file:new(#{path => Path}),
    [tracekit_file:trace('receive', F, self(), {msg, I}, #{}) || I <- lists:seq(1, 10)],
    ok = tracekit_file:close(F),
    Out = Path ++ ".html",
    try
        ?assertMatch({ok, #{events := 10, rows := 10}}, tracekit_report:write(Path, Out)),
        {ok, Bin} = file:read_file(Out),
        ?assertEqual(10, length(rows(parse(Bin))))
    after
        file:delete(Path),
        file:delete(Out)
    end,
    ?assertEqual({error, {bad_source, 42}}, tracekit_report:html(42, #{})),
    ?assertEqual({error, {bad_option, {max_rows, -1}}}, tracekit_report:html([], #{max_rows => -1})),
    ?assertEqual({error, {bad_option, {colour, red}}}, tracekit_report:html([], #{colour => red})),
    ?assertMatch({error, {file, "/nonexistent/x.html", enoent}},
                 tracekit_report:write([], "/nonexistent/x.html")).
