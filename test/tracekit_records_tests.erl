-module(tracekit_records_tests).

-include_lib("eunit/include/eunit.hrl").

-behaviour(gen_server).
-export([init/1, handle_call/3, handle_cast/2]).

%% Records of this module, read from its debug info.
-record(state, {count = 0 :: integer(), name, items = [] :: list()}).
-record(empty, {}).
-record(typed, {a :: atom(), b = 1 :: integer()}).

init(X) -> {ok, X}.
handle_call(_, _, S) -> {reply, #state{}, S}.
handle_cast(_, S) -> {noreply, S}.

these() ->
    #{{state, 3} => [count, name, items], {empty, 0} => [], {typed, 2} => [a, b]}.

read_test() ->
    {ok, Defs} = tracekit_records:read(?MODULE),
    ?assertEqual(these(), Defs),
    %% The records are in use (the compiler keeps them anyway).
    ?assertMatch(#state{count = 0}, #state{}),
    ?assertMatch(#empty{}, #empty{}),
    ?assertMatch(#typed{b = 1}, #typed{}).

%% Never a crash: what has no records says why.
no_records_test_() ->
    [?_assertMatch({error, {not_a_file, preloaded}}, tracekit_records:read(erlang)),
     ?_assertMatch({error, not_loaded}, tracekit_records:read(no_such_module_tk)),
     ?_assertMatch({error, {not_a_module, "x"}}, tracekit_records:read("x")),
     ?_assertMatch({ok, #{}}, tracekit_records:read(lists))].

%% Modules compiled without debug info, loaded from memory, or whose file
%% is no longer the code that runs.
odd_modules_test_() ->
    {setup,
     fun() ->
             Dir = filename:join(["/tmp", "tracekit_records_tests." ++ os:getpid()]),
             ok = filelib:ensure_path(Dir),
             Dir
     end,
     fun(Dir) ->
             [begin code:purge(M), code:delete(M), code:purge(M) end
              || M <- [tk_rec_plain, tk_rec_memory, tk_rec_changed]],
             _ = file:del_dir_r(Dir)
     end,
     fun(Dir) ->
             Src = fun(M, Rec) ->
                           ["-module(", atom_to_list(M), ").\n-export([f/0]).\n",
                            "-record(", Rec, ", {a, b}).\nf() -> #", Rec, "{}.\n"]
                   end,
             Compile = fun(M, Rec, Opts) ->
                               File = filename:join(Dir, atom_to_list(M) ++ ".erl"),
                               ok = file:write_file(File, Src(M, Rec)),
                               {ok, M} = compile:file(File, [{outdir, Dir}, report | Opts]),
                               filename:join(Dir, atom_to_list(M))
                       end,
             [?_test(begin
                         Beam = Compile(tk_rec_plain, "r", []),
                         {module, _} = code:load_abs(Beam),
                         ?assertEqual({error, no_debug_info}, tracekit_records:read(tk_rec_plain))
                     end),
              ?_test(begin
                         Beam = Compile(tk_rec_memory, "r", [debug_info]),
                         {ok, Bin} = file:read_file(Beam ++ ".beam"),
                         {module, _} = code:load_binary(tk_rec_memory, "", Bin),
                         ?assertMatch({error, {not_a_file, _}}, tracekit_records:read(tk_rec_memory))
                     end),
              ?_test(begin
                         Beam = Compile(tk_rec_changed, "old", [debug_info]),
                         {module, _} = code:load_abs(Beam),
                         ?assertEqual({ok, #{{old, 2} => [a, b]}},
                                      tracekit_records:read(tk_rec_changed)),
                         %% Compiled again, not loaded: the file is not the
                         %% code that runs.
                         _ = Compile(tk_rec_changed, "new", [debug_info]),
                         ?assertEqual({error, not_the_loaded_code},
                                      tracekit_records:read(tk_rec_changed))
                     end)]
     end}.

cache_test() ->
    C0 = tracekit_records:new(),
    ?assertEqual(#{}, tracekit_records:defs(C0)),
    C1 = tracekit_records:new([?MODULE, erlang, no_such_module_tk]),
    ?assertEqual(these(), tracekit_records:defs(C1)),
    ?assertEqual([erlang, no_such_module_tk, ?MODULE], tracekit_records:modules(C1)),
    %% Read once: adding again changes nothing.
    ?assertEqual(C1, tracekit_records:add([?MODULE, erlang], C1)),
    ?assertEqual(C1, tracekit_records:add(?MODULE, C1)).

%% The first definition of a name and size wins.
first_wins_test() ->
    {ok, Defs} = tracekit_records:read(?MODULE),
    C = tracekit_records:add([?MODULE], tracekit_records:new()),
    ?assertEqual(Defs, tracekit_records:defs(C)).

%% The modules an event touches: the function called, the function a
%% process was spawned with, the module a process was started in.
learn_test() ->
    {ok, Server} = gen_server:start(?MODULE, x, []),
    try
        Learn = fun(E) -> tracekit_records:modules(tracekit_records:learn(E, tracekit_records:new())) end,
        Dead = list_to_pid("<0.0.1>"),
        ?assertEqual([?MODULE], Learn({trace, Server, 'receive', hello})),
        ?assertEqual([?MODULE], Learn({trace_ts, Dead, call, {?MODULE, f, []}, {1, 2, 3}})),
        ?assertEqual([?MODULE], Learn({trace, Dead, return_from, {?MODULE, f, 0}, ok})),
        ?assertEqual([lists, ?MODULE], Learn({trace, Dead, spawn, Server, {lists, seq, [1, 2]}})),
        ?assertEqual([?MODULE], Learn({seq_trace, 1, {send, {0, 1}, Server, Dead, x}})),
        ?assertEqual([?MODULE], Learn({seq_trace, 1, {'receive', {0, 1}, Dead, Server, x}, {1, 2, 3}})),
        ?assertEqual([], Learn({trace, Dead, call, {"m", f, []}})),
        ?assertEqual([], Learn(x)),
        ?assertEqual([], Learn({trace})),
        ?assertEqual([], Learn({seq_trace, 1, x})),
        %% A process is looked up once.
        C = tracekit_records:learn({trace, Server, 'receive', x}, tracekit_records:new()),
        ?assertEqual(C, tracekit_records:learn({trace, Server, send, y, Server}, C))
    after
        gen_server:stop(Server)
    end.

print_fun_test() ->
    F = tracekit_records:print_fun(these()),
    ?assertEqual([count, name, items], F(state, 3)),
    ?assertEqual(no, F(state, 2)),
    ?assertEqual(no, F(other, 3)),
    ?assertEqual("#state{count = 3,name = x,items = []}",
                 lists:flatten(io_lib_pretty:print({state, 3, x, []},
                                                   [{record_print_fun, F}, {line_length, 0}]))).
