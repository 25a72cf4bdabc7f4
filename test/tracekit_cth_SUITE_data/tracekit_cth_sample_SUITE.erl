%% A sample suite run by tracekit_cth_SUITE on a peer node (never by the
%% project's own test run): some cases fail on purpose, so that the
%% tracekit_cth hook writes their traces.
-module(tracekit_cth_sample_SUITE).

-behaviour(gen_server).

-export([suite/0, all/0, groups/0, init_per_group/2, end_per_group/2,
         init_per_testcase/2, end_per_testcase/2]).
-export([passing_case/1, failing_case/1, failing_untraced/1,
         passing_always/1, group_failing/1]).
-export([init/1, handle_call/3, handle_cast/2]).

suite() ->
    [{ct_hooks,
      [{tracekit_cth,
        #{calls => ["tracekit_cth_sample_SUITE:handle_call({get, _}, _, _) -> return"],
          processes => [testcase, sample_server],
          messages => true,
          seq_trace => true,
          testcases => #{passing_always => #{always => true}},
          groups => #{quiet => #{messages => false, seq_trace => false}}}}]}].

all() ->
    [passing_case, failing_case, failing_untraced, passing_always,
     {group, quiet}].

groups() ->
    [{quiet, [], [group_failing]}].

init_per_group(_, Config) -> Config.
end_per_group(_, _) -> ok.

init_per_testcase(failing_untraced, Config) ->
    start_server(),
    [{tracekit, false} | Config];
init_per_testcase(_, Config) ->
    start_server(),
    Config.

end_per_testcase(_, _) ->
    gen_server:stop(sample_server).

start_server() ->
    {ok, _} = gen_server:start({local, sample_server}, ?MODULE, #{color => blue}, []).

passing_case(_) ->
    blue = gen_server:call(sample_server, {get, color}),
    ok.

failing_case(_) ->
    blue = gen_server:call(sample_server, {get, color}),
    %% There is no size: the server answers undefined and the match fails.
    10 = gen_server:call(sample_server, {get, size}).

failing_untraced(_) ->
    ct:fail(untraced_failure).

passing_always(_) ->
    blue = gen_server:call(sample_server, {get, color}),
    ok.

group_failing(_) ->
    red = gen_server:call(sample_server, {get, color}).

%% gen_server callbacks of sample_server.
init(State) -> {ok, State}.
handle_call({get, Key}, _From, State) -> {reply, maps:get(Key, State, undefined), State}.
handle_cast(_, State) -> {noreply, State}.
