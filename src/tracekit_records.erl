%% @doc Record definitions read from the debug info of loaded modules, so
%% that traced terms print as `#state{count = 3,name = x}'.
%%
%% A cache holds the definitions of the modules read so far; each module
%% is read at most once per cache (a trace keeps one). A module is read
%% only when it is loaded, from the object file it was loaded from, and
%% only when that file is still the code that runs (same MD5). Reading
%% goes straight to the file (`prim_file'), sending no message to the
%% file or code server, so a trace of messages does not see it. A module
%% without debug info, loaded from memory, preloaded, cover compiled, or
%% whose file cannot be read simply has no records: reading never fails.
%%
%% When two modules define a record of the same name and size, the one
%% read first wins. Definitions are always read on the node the cache is
%% on (for a trace across nodes: the node that started it).
-module(tracekit_records).

-export([new/0, new/1, read/1, add/2, learn/2, defs/1, modules/1, print_fun/1]).

-export_type([cache/0, defs/0]).

-include_lib("kernel/include/file.hrl").

%% Fields of records by name and number of fields.
-type defs() :: #{{atom(), non_neg_integer()} => [atom()]}.
-opaque cache() :: #{mods := #{module() => ok | none},
                     defs := defs(),
                     pids := #{pid() => []}}.

%% At most this many modules are read into one cache, and this many
%% processes looked up for the module they run: a trace of everything
%% does not read the whole code path.
-define(MAX_MODULES, 200).
-define(MAX_PIDS, 10000).
%% Object files larger than this are not read.
-define(MAX_FILE, 64 bsl 20).

%% @doc An empty cache.
-spec new() -> cache().
new() ->
    #{mods => #{}, defs => #{}, pids => #{}}.

%% @doc A cache with the records of `Modules' read.
-spec new([module()]) -> cache().
new(Modules) ->
    add(Modules, new()).

%% @doc Reads the records of `Modules' that are not read yet.
-spec add([module()] | module(), cache()) -> cache().
add(M, Cache) when is_atom(M) ->
    add([M], Cache);
add(Modules, Cache) when is_list(Modules) ->
    lists:foldl(fun add1/2, Cache, Modules).

add1(M, #{mods := Mods} = Cache) when is_atom(M), not is_map_key(M, Mods),
                                      map_size(Mods) < ?MAX_MODULES ->
    case read(M) of
        {ok, Defs} ->
            Cache#{mods := Mods#{M => ok}, defs := maps:merge(Defs, maps:get(defs, Cache))};
        {error, _} ->
            Cache#{mods := Mods#{M => none}}
    end;
add1(_, Cache) ->
    Cache.

%% @doc Reads the records of the modules an event touches: the function
%% of a call, return or exception, the function a process was spawned
%% with, and for each process of this node that is seen for the first
%% time (the one traced, the other end of a message, a child or a link),
%% the module it was started in (a gen_server's callback module, say).
-spec learn(term(), cache()) -> cache().
learn(E, Cache) when is_tuple(E), tuple_size(E) >= 4, (element(1, E) =:= trace orelse
                                                       element(1, E) =:= trace_ts) ->
    Mods = [M || {M, _, _} <- [element(4, E)], is_atom(M)]
        ++ [M || Tag <- [element(3, E)], Tag =:= spawn orelse Tag =:= spawned,
                 tuple_size(E) >= 5, {M, _, _} <- [element(5, E)], is_atom(M)],
    Pids = [P || P <- lists:sublist(tuple_to_list(E), 2, 4), is_pid(P)],
    add(Mods, lists:foldl(fun process/2, Cache, Pids));
learn({seq_trace, _, Info}, Cache) ->
    learn_seq(Info, Cache);
learn({seq_trace, _, Info, _}, Cache) ->
    learn_seq(Info, Cache);
learn(_, Cache) ->
    Cache.

learn_seq(Info, Cache) when is_tuple(Info), tuple_size(Info) =:= 5 ->
    process(element(4, Info), process(element(3, Info), Cache));
learn_seq(_, Cache) ->
    Cache.

process(P, #{pids := Pids} = Cache) when is_pid(P), node(P) =:= node(),
                                         not is_map_key(P, Pids),
                                         map_size(Pids) < ?MAX_PIDS ->
    add(started_in(P), Cache#{pids := Pids#{P => []}});
process(_, Cache) ->
    Cache.

%% The module a process was started in: proc_lib's initial call (the
%% callback module of a gen_server, gen_statem, supervisor...), else the
%% process's own initial call.
started_in(P) ->
    case erlang:process_info(P, {dictionary, '$initial_call'}) of
        {{dictionary, '$initial_call'}, {M, _, _}} when is_atom(M) -> [M];
        _ ->
            case erlang:process_info(P, initial_call) of
                {initial_call, {M, _, _}} when M =/= erlang, M =/= proc_lib -> [M];
                _ -> []
            end
    end.

%% @doc The definitions read so far.
-spec defs(cache()) -> defs().
defs(#{defs := Defs}) ->
    Defs.

%% @doc The modules read so far that define records or not.
-spec modules(cache()) -> [module()].
modules(#{mods := Mods}) ->
    lists:sort(maps:keys(Mods)).

%% @doc The function `io_lib_pretty' takes as `record_print_fun'.
-spec print_fun(defs()) -> fun((atom(), non_neg_integer()) -> no | [atom()]).
print_fun(Defs) ->
    fun(Name, N) ->
            case Defs of
                #{{Name, N} := Fields} when is_list(Fields), length(Fields) =:= N ->
                    case lists:all(fun is_atom/1, Fields) of
                        true -> Fields;
                        false -> no
                    end;
                #{} ->
                    no
            end
    end.

%% @doc The records a loaded module defines, from its debug info.
-spec read(module()) -> {ok, defs()} | {error, term()}.
read(M) when is_atom(M) ->
    try
        File = case code:is_loaded(M) of
                   {file, F} when is_list(F), F =/= "" -> F;
                   {file, Other} -> throw({not_a_file, Other});
                   false -> throw(not_loaded)
               end,
        Bin = case file_size(File) of
                  Size when Size =< ?MAX_FILE ->
                      case prim_file:read_file(File) of
                          {ok, B} -> B;
                          {error, Posix} -> throw({file, Posix})
                      end;
                  Size -> throw({too_large, Size})
              end,
        case beam_lib:md5(Bin) of
            {ok, {M, MD5}} ->
                case erlang:get_module_info(M, md5) of
                    MD5 -> ok;
                    _ -> throw(not_the_loaded_code)
                end;
            _ -> throw(not_a_beam)
        end,
        {ok, records(forms(M, Bin))}
    catch
        throw:Why -> {error, Why};
        Class:Why -> {error, {Class, Why}}
    end;
read(M) ->
    {error, {not_a_module, M}}.

file_size(File) ->
    case prim_file:read_file_info(File) of
        {ok, #file_info{size = Size}} -> Size;
        {error, Posix} -> throw({file, Posix})
    end.

%% The abstract code in the debug info (the Dbgi chunk), read without
%% beam_lib's key server: encrypted debug info is left alone.
forms(M, Bin) ->
    case beam_lib:chunks(Bin, ["Dbgi"]) of
        {ok, {M, [{"Dbgi", Chunk}]}} when byte_size(Chunk) > 0 ->
            case binary_to_term(Chunk) of
                {debug_info_v1, erl_abstract_code, {Forms, _}} when is_list(Forms) ->
                    Forms;
                {debug_info_v1, Backend, Data} when is_atom(Backend),
                                                    Backend =/= erl_abstract_code ->
                    %% Another language's backend (Elixir's), when it is loaded.
                    case erlang:module_loaded(Backend) of
                        true ->
                            case Backend:debug_info(erlang_v1, M, Data, []) of
                                {ok, Forms} when is_list(Forms) -> Forms;
                                _ -> throw(no_debug_info)
                            end;
                        false ->
                            throw({backend_not_loaded, Backend})
                    end;
                _ ->
                    throw(no_debug_info)
            end;
        _ ->
            throw(no_debug_info)
    end.

records(Forms) ->
    maps:from_list([{{Name, length(Fields)}, Fields}
                    || {attribute, _, record, {Name, Fs}} <- Forms, is_atom(Name),
                       Fields <- [[field_name(F) || F <- Fs]],
                       lists:all(fun is_atom/1, Fields)]).

field_name({typed_record_field, F, _Type}) -> field_name(F);
field_name({record_field, _, {atom, _, Name}}) -> Name;
field_name({record_field, _, {atom, _, Name}, _Default}) -> Name;
field_name(_) -> 0.                             % not a record of names
