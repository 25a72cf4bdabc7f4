%% The shipped modules call one another without a cycle (README, "Map of
%% the tree"): a cycle would make the layers of the map a fiction. One pair
%% is one module in two files: tracekit_file's NIF library holds the
%% reader's functions too (a library is loaded by one module), so
%% tracekit_file_reader calls tracekit_file's stubs while tracekit_file's
%% read/1 and fold/3,4 are tracekit_file_reader's work.
-module(tracekit_graph_tests).

-include_lib("eunit/include/eunit.hrl").

no_cycle_test() ->
    _ = application:load(tracekit),
    {ok, Mods} = application:get_key(tracekit, modules),
    Ebin = filename:dirname(code:which(tracekit)),
    {ok, X} = xref:start([{xref_mode, modules}]),
    try
        _ = xref:set_default(X, [{warnings, false}, {verbose, false}]),
        [{ok, _} = xref:add_module(X, filename:join(Ebin, atom_to_list(M))) || M <- Mods],
        {ok, Edges} = xref:q(X, "ME || AM"),
        ?assert(length(Edges) > length(Mods)),
        {ok, Components} = xref:q(X, "components ME"),
        ?assertEqual([[tracekit_file, tracekit_file_reader]],
                     [lists:sort(C) || C <- Components, length(C) > 1])
    after
        xref:stop(X)
    end.
