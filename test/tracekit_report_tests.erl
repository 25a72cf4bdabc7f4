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

%% A reply whose sender was not traced comes from the process its call
%% went to (to an alias, or to {Pid, Tag}), not from "(untraced)"; a
%% request tagged with a reference is no reply.
replies_from_the_called_process_test() ->
    C = c:pid(0, 80, 0),
    S = c:pid(0, 81, 0),
    T = c:pid(0, 82, 0),
    [R1, R2, R3] = [make_ref() || _ <- [1, 2, 3]],
    %% Only C is traced: its sends and receives.
    Events = [{trace_ts, C, send, {'$gen_call', {C, [alias | R1]}, {get, k}}, S, 1000},
              {trace_ts, C, 'receive', {[alias | R1], 42}, 2000},
              {trace_ts, C, send, {'$gen_call', {C, R2}, stop}, srv, 3000},
              {trace_ts, C, 'receive', {R2, ok}, 4000},
              {trace_ts, C, send, {R3, {get, x}}, T, 5000},
              {trace_ts, C, 'receive', from_outside, 6000}],
    {Bin, _} = html(Events, #{names => #{T => srv}}),
    Doc = parse(Bin),
    Arrows = arrows(Doc),
    Labels = [texts(hd(xpath("text", G))) || G <- Arrows],
    ?assertMatch(["call {get,k}", "reply 42", "call stop", "reply ok", "{#Ref<" ++ _,
                  "from_outside"], Labels),
    XS = fun(G) -> [list_to_integer(V) || A <- ["x1", "x2"],
                                          #xmlAttribute{value = V} <- xpath("line/@" ++ A, G)]
         end,
    [Call1, Reply1, Call2, Reply2 | _] = [XS(G) || G <- Arrows],
    %% Each reply goes back along its call: from the server to the client.
    [?assert(abs(RX1 - CX2) =< 2 andalso abs(RX2 - CX1) =< 2, {Call, Reply})
     || {[CX1, CX2] = Call, [RX1, RX2] = Reply} <- [{Call1, Reply1}, {Call2, Reply2}]],
    Heads = [texts(H) || H <- xpath("//svg[@class='sequence']/g[@class='head']/text", Doc)],
    ?assertEqual(1, length([H || H <- Heads, string:find(H, "(untraced)") =/= nomatch])).

%% arrows/2, what the CT hook's Mermaid diagrams are drawn from, pairs as
%% the page does: a reply whose sender was not traced comes from the
%% called process, a send to a name goes to its process, a message seen
%% by both process tracing and seq_trace is one arrow of both kinds.
arrows_test() ->
    C = c:pid(0, 80, 0),
    S = c:pid(0, 81, 0),
    R = make_ref(),
    Call = {'$gen_call', {C, [alias | R]}, {get, k}},
    Events = [{trace_ts, C, send, Call, S, 1000},
              {seq_trace, 0, {send, {0, 1}, C, S, Call}, 1000},
              {seq_trace, 0, {'receive', {0, 1}, C, S, Call}, 1500},
              {trace_ts, C, 'receive', {[alias | R], 42}, 2000},
              {trace_ts, C, send, hello, srv, 3000},
              {trace_ts, C, 'receive', from_outside, 4000}],
    ?assertEqual([{C, S, Call, [seq, ptrace]},
                  {S, C, {[alias | R], 42}, [ptrace]},
                  {C, S, hello, [ptrace]},
                  {untraced, C, from_outside, [ptrace]}],
                 tracekit_report:arrows(Events, #{S => srv})).

%% Labels stay between the lifelines of their arrow (or, for an arrow to
%% itself, in its column), and never start left of the picture, however
%% long the message; the columns widen for long labels, within bounds.
labels_fit_test() ->
    Ps = [c:pid(0, 80 + I, 0) || I <- lists:seq(0, 3)],
    [A, B, C, D] = Ps,
    Long = {put, lists:duplicate(30, $k), lists:seq(1, 40)},
    Events = [{trace_ts, A, send, Long, B, 1000},
              {trace_ts, B, send, {'$gen_cast', Long}, A, 2000},
              {trace_ts, C, send, Long, D, 3000},
              {trace_ts, D, send, Long, A, 4000},
              {trace_ts, A, send, Long, A, 5000},
              {trace_ts, D, send, short, C, 6000}],
    {Bin, _} = html(Events, #{}),
    Doc = parse(Bin),
    Heads = [list_to_integer(V) || #xmlAttribute{value = V}
                                       <- xpath("//svg[@class='sequence']/line[@class='lifeline']/@x1",
                                                Doc)],
    Col = lists:nth(2, Heads) - hd(Heads),
    ?assert(Col > 190 andalso Col =< 460),
    [begin
         [Text] = xpath("text", G),
         Label = texts(Text),
         [TX] = [list_to_integer(V) || #xmlAttribute{value = V} <- xpath("@x", Text)],
         Width = 7 * string:length(Label),
         {Lo, Hi} = case xpath("line", G) of
                        [] -> {TX, TX + Col - 36};                       % to itself
                        [_] -> [X1, X2] = [list_to_integer(V) || At <- ["x1", "x2"],
                                                                  #xmlAttribute{value = V}
                                                                      <- xpath("line/@" ++ At, G)],
                               {min(X1, X2), max(X1, X2)}
                    end,
         {L, R} = case xpath("line", G) of
                      [] -> {TX, TX + Width};
                      _ -> {TX - Width div 2, TX + Width div 2}
                  end,
         ?assert(L >= Lo andalso R =< Hi andalso L >= 0, {Label, L, R, Lo, Hi})
     end || G <- arrows(Doc)],
    ?assertMatch("short", texts(hd(xpath("text", lists:last(arrows(Doc)))))).

%% One long first call does not squeeze the others into slivers: every
%% call bar is a few pixels wide at least, and the bars keep their order
%% in time.
timeline_scale_test() ->
    A = c:pid(0, 80, 0),
    Long = [{trace_ts, A, call, {m, init, []}, 0},
            {trace_ts, A, return_from, {m, init, 0}, ok, 1000000000}],
    Short = lists:append([[{trace_ts, A, call, {m, f, [I]}, 1000000000 + I * 100000},
                           {trace_ts, A, return_from, {m, f, 1}, ok, 1000000000 + I * 100000 + 10000}]
                          || I <- lists:seq(1, 20)]),
    {Bin, _} = html(Long ++ Short, #{}),
    Doc = parse(Bin),
    Bars = [{list_to_integer(X), list_to_integer(W)}
            || R <- xpath("//svg[@class='timeline']//rect[@class='call']", Doc),
               #xmlAttribute{value = X} <- xpath("@x", R), #xmlAttribute{value = W} <- xpath("@width", R)],
    ?assertEqual(21, length(Bars)),
    [?assert(W >= 4, {X, W}) || {X, W} <- Bars],
    Xs = [X || {X, _} <- tl(lists:sort(Bars))],
    ?assertEqual(Xs, lists:usort(Xs)),
    %% The long call is still the longest.
    {_, LongW} = hd(lists:sort(Bars)),
    ?assert(lists:all(fun({_, W}) -> W < LongW end, tl(lists:sort(Bars)))).

%% The table prints each event as tracekit_format prints the same events
%% with the same options: records, short reference tags (as the CT hook's
%% text file does).
table_printing_test() ->
    A = c:pid(0, 80, 0),
    Ref = make_ref(),
    Defs = #{{state, 2} => [count, items]},
    Events = [{trace_ts, A, call, {m, handle, [{get, Ref}, {state, 1, #{}}]}, 1000},
              {trace_ts, A, return_from, {m, handle, 2}, {reply, Ref, {state, 2, #{}}}, 2000},
              {trace_ts, A, send, {Ref, ok}, Ref, 3000}],
    Opts = #{records => Defs, short_refs => true},
    {Bin, _} = html(Events, Opts),
    Doc = parse(Bin),
    Rows = [texts(lists:last(xpath("td", R))) || R <- rows(Doc)],
    Expected = [unicode:characters_to_list(L)
                || {_, L} <- tracekit_format:events(Events, Opts#{names => #{}})],
    ?assertEqual(Expected, Rows),
    [?assertNotEqual(nomatch, string:find(R, "#state{count = ")) || R <- lists:sublist(Rows, 2)],
    [?assertNotEqual(nomatch, string:find(R, "#Ref<..")) || R <- Rows],
    %% Without the options: tuples and whole references.
    {Plain, _} = html(Events, #{}),
    PlainRows = [texts(lists:last(xpath("td", R))) || R <- rows(parse(Plain))],
    [?assertEqual(nomatch, string:find(R, "#state{")) || R <- PlainRows],
    ?assertEqual({error, {bad_option, {short_refs, yes}}},
                 tracekit_report:html([], #{short_refs => yes})).

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
