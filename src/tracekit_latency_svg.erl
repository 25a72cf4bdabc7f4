%% @private
%% @doc The picture of a latency histogram: an SVG drawing per function,
%% durations on a log-scaled axis (10 bars per decade), the calls that
%% returned as blue bars and those that raised stacked on them in red,
%% the p50, p90 and p99 as dashed lines and the maximum as a solid one;
%% each bar says on hover what it holds. {@link tracekit_report} puts the
%% drawings in its page (a Latency section) and {@link tracekit_export}
%% writes them as one SVG document.
%%
%% The drawing's elements carry classes the checks read back: `svg.latency'
%% per function (with `data-mfa'), `rect.bar' and `rect.exc', `line.mark'
%% (with `data-p' and `data-us'), `text.tick' (with `data-us').
-module(tracekit_latency_svg).

-export([svg/2, section/2, document/2]).

-define(W, 720).
-define(H, 204).
-define(LEFT, 64).
-define(RIGHT, 700).
-define(TOP, 68).
-define(BOTTOM, 168).
-define(PER_DECADE, 10).

%% @doc The drawing of one function's latency.
-spec svg(mfa(), tracekit_latency:function_latency()) -> iolist().
svg(MFA, #{returns := R, exceptions := E} = L) ->
    S = tracekit_hist:summary(L),
    Both = tracekit_hist:merge(R, E),
    {Lo, Hi} = decades(Both),
    X = fun(Ns) -> x(Ns, Lo, Hi) end,
    Bins = bins([{r, R}, {e, E}], Lo, Hi),
    Top = lists:max([1 | [Nr + Ne || {_, Nr, Ne} <- Bins]]),
    Y = fun(N) -> ?BOTTOM - (?BOTTOM - ?TOP) * N / Top end,
    Name = mfa(MFA),
    ["<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"latency\" width=\"", int(?W),
     "\" height=\"", int(?H), "\" viewBox=\"0 0 ", int(?W), " ", int(?H), "\" data-mfa=\"",
     esc(Name), "\">\n",
     "<rect x=\"0\" y=\"0\" width=\"", int(?W), "\" height=\"", int(?H),
     "\" fill=\"#ffffff\" stroke=\"#dddddd\"/>\n",
     "<text x=\"8\" y=\"16\" font-family=\"monospace\" font-size=\"12\" font-weight=\"bold\">",
     esc(Name), "</text>\n",
     "<text x=\"8\" y=\"30\" font-family=\"monospace\" font-size=\"11\" fill=\"#444444\">",
     esc(caption(S)), "</text>\n",
     [bar(B, Lo, X, Y) || {_, Nr, Ne} = B <- Bins, Nr + Ne > 0],
     axis(Lo, Hi, X, Top),
     %% Each mark's label on a row of its own: marks close together stay
     %% readable.
     [mark(P, maps:get(K, S), X, Dash, Row) || maps:get(count, S) > 0,
                                              {Row, {P, K, Dash}} <- lists:enumerate(
                                                                       0, [{"p50", p50, true},
                                                                           {"p90", p90, true},
                                                                           {"p99", p99, true},
                                                                           {"max", max, false}])],
     "</svg>\n"].

caption(#{count := N, exceptions := E} = S) ->
    D = fun(K) -> tracekit_latency_view:duration(maps:get(K, S)) end,
    lists:flatten(
      [io_lib:format("~w returned", [N]),
       [io_lib:format(": p50 ~s, p90 ~s, p99 ~s, max ~s, total ~s",
                      [D(p50), D(p90), D(p99), D(max), D(total)]) || N > 0],
       [io_lib:format("; ~w raised (max ~s)", [E, D(exception_max)]) || E > 0]]).

%% The decades the axis spans (powers of ten of nanoseconds): from the one
%% below the minimum to the one above the maximum.
decades(#{count := 0}) ->
    {3, 6};
decades(#{min := Min, max := Max}) ->
    Lo = floor(math:log10(max(1, Min))),
    Hi = max(Lo + 1, ceil(math:log10(max(1, Max)) + 1.0e-12)),
    {Lo, Hi}.

x(Ns, Lo, Hi) ->
    L = math:log10(max(1, Ns)),
    ?LEFT + (?RIGHT - ?LEFT) * (min(max(L, Lo), Hi) - Lo) / (Hi - Lo).

%% Bars of 1/10 decade: {Bin, Returned, Raised}, each histogram bucket in
%% the bar of the value it stands for.
bins(Hists, Lo, Hi) ->
    N = (Hi - Lo) * ?PER_DECADE,
    Counts = lists:foldl(
               fun({Kind, #{buckets := B}}, Acc) ->
                       lists:foldl(fun({I, C}, A) ->
                                           {_, _, V} = tracekit_latency:bucket(I),
                                           Bin = min(N - 1, max(0, floor((math:log10(max(1, V)) - Lo)
                                                                         * ?PER_DECADE))),
                                           maps:update_with({Kind, Bin}, fun(X) -> X + C end, C, A)
                                   end, Acc, B)
               end, #{}, Hists),
    [{Bin, maps:get({r, Bin}, Counts, 0), maps:get({e, Bin}, Counts, 0)}
     || Bin <- lists:seq(0, N - 1)].

bar({Bin, Nr, Ne}, Lo, X, Y) ->
    %% The bar's durations: its tenth of a decade (ns).
    {From, To} = {math:pow(10, Lo + Bin / ?PER_DECADE), math:pow(10, Lo + (Bin + 1) / ?PER_DECADE)},
    {X0, X1} = {X(From), X(To)},
    Hover = lists:flatten(io_lib:format("~s to ~s: ~w returned~s",
                                        [tracekit_latency_view:duration(From / 1000),
                                         tracekit_latency_view:duration(To / 1000), Nr,
                                         [io_lib:format(", ~w raised", [Ne]) || Ne > 0]])),
    [[rect("bar", "#3f6fb5", X0, Y(Nr), X1 - X0, ?BOTTOM - Y(Nr), Hover, Nr) || Nr > 0],
     [rect("exc", "#c62828", X0, Y(Nr + Ne), X1 - X0, Y(Nr) - Y(Nr + Ne), Hover, Ne) || Ne > 0]].

rect(Class, Fill, X, Y, W, H, Hover, N) ->
    ["<rect class=\"", Class, "\" fill=\"", Fill, "\" stroke=\"#ffffff\" stroke-width=\"0.5\" x=\"",
     num(X), "\" y=\"", num(Y), "\" width=\"", num(max(0.5, W)), "\" height=\"", num(H),
     "\" data-n=\"", int(N), "\"><title>", esc(Hover), "</title></rect>\n"].

axis(Lo, Hi, X, Top) ->
    ["<line class=\"axis\" stroke=\"#999999\" x1=\"", int(?LEFT), "\" y1=\"", int(?BOTTOM),
     "\" x2=\"", int(?RIGHT), "\" y2=\"", int(?BOTTOM), "\"/>\n",
     "<line class=\"axis\" stroke=\"#999999\" x1=\"", int(?LEFT), "\" y1=\"", int(?TOP),
     "\" x2=\"", int(?LEFT), "\" y2=\"", int(?BOTTOM), "\"/>\n",
     "<text x=\"", int(?LEFT - 6), "\" y=\"", int(?TOP + 4),
     "\" text-anchor=\"end\" font-family=\"monospace\" font-size=\"10\">", int(Top), "</text>\n",
     "<text x=\"", int(?LEFT - 6), "\" y=\"", int(?BOTTOM),
     "\" text-anchor=\"end\" font-family=\"monospace\" font-size=\"10\">0</text>\n",
     [begin
          Ns = math:pow(10, D),
          Xd = X(Ns),
          ["<line stroke=\"#cccccc\" x1=\"", num(Xd), "\" y1=\"", int(?BOTTOM), "\" x2=\"",
           num(Xd), "\" y2=\"", int(?BOTTOM + 5), "\"/>\n",
           "<text class=\"tick\" data-us=\"", num(Ns / 1000), "\" x=\"", num(Xd), "\" y=\"",
           int(?BOTTOM + 17), "\" text-anchor=\"middle\" font-family=\"monospace\" "
           "font-size=\"10\">", tracekit_latency_view:duration(Ns / 1000), "</text>\n"]
      end || D <- lists:seq(Lo, Hi)],
     "<text x=\"", int(?RIGHT), "\" y=\"", int(?H - 4),
     "\" text-anchor=\"end\" font-family=\"monospace\" font-size=\"10\" fill=\"#666666\">"
     "duration (log scale); calls per tenth of a decade</text>\n"].

mark(Label, Us, X, Dashed, Row) ->
    Xm = X(Us * 1000),
    Y = ?TOP - 28 + 8 * Row,
    ["<line class=\"mark\" data-p=\"", Label, "\" data-us=\"", num(Us), "\" stroke=\"#e65100\"",
     case Dashed of true -> " stroke-dasharray=\"4 3\""; false -> "" end,
     " x1=\"", num(Xm), "\" y1=\"", int(Y - 6), "\" x2=\"", num(Xm), "\" y2=\"", int(?BOTTOM),
     "\"><title>", Label, " ", tracekit_latency_view:duration(Us), "</title></line>\n",
     %% (A label near the right end is drawn to the left of its line.)
     case Xm > ?RIGHT - 90 of
         true -> ["<text text-anchor=\"end\" x=\"", num(Xm - 3)];
         false -> ["<text x=\"", num(Xm + 3)]
     end, "\" y=\"", int(Y),
     "\" font-family=\"monospace\" font-size=\"9\" fill=\"#e65100\">", Label, " ",
     tracekit_latency_view:duration(Us), "</text>\n"].

%% @doc The Latency section of an HTML page: a table of the functions and
%% their drawings, by total time (`sort => max': by their slowest call),
%% at most `max' of them (default 20).
-spec section(tracekit_latency_view:functions(), map()) -> iolist().
section(Fns, Opts) ->
    Rows = sorted(Fns, Opts),
    Left = map_size(Fns) - length(Rows),
    ["<h2 id=\"latency\">Latency</h2>\n",
     "<table class=\"latency\">\n<thead><tr><th>function</th><th>count</th><th>p50</th>"
     "<th>p90</th><th>p99</th><th>max</th><th>total</th><th>raised</th></tr></thead>\n<tbody>\n",
     [begin
          #{count := N, exceptions := E} = S = tracekit_hist:summary(L),
          D = fun(_) when N =:= 0 -> "-";
                 (K) -> tracekit_latency_view:duration(maps:get(K, S))
              end,
          ["<tr><td>", esc(mfa(MFA)), "</td><td class=\"n\">", int(N), "</td>",
           [["<td class=\"n\">", D(K), "</td>"] || K <- [p50, p90, p99, max, total]],
           "<td class=\"n\">", int(E), "</td></tr>\n"]
      end || {MFA, L} <- Rows],
     "</tbody>\n</table>\n",
     case Left of
         0 -> [];
         _ -> ["<p class=\"cap\">", int(Left), " more functions not shown</p>\n"]
     end,
     [["<div>", svg(MFA, L), "</div>\n"] || {MFA, L} <- Rows]].

%% @doc One SVG document of the drawings of the functions (as `section'
%% sorts and caps them), one under the other.
-spec document(tracekit_latency_view:functions(), map()) -> iolist().
document(Fns, Opts) ->
    Rows = sorted(Fns, Opts),
    H = max(1, length(Rows)) * (?H + 8),
    ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", int(?W), "\" height=\"", int(H),
     "\" viewBox=\"0 0 ", int(?W), " ", int(H), "\">\n",
     case Rows of
         [] -> "<text x=\"8\" y=\"20\" font-family=\"monospace\">no calls measured</text>\n";
         _ -> []
     end,
     [["<g transform=\"translate(0,", int(K * (?H + 8)), ")\">\n", svg(MFA, L), "</g>\n"]
      || {K, {MFA, L}} <- lists:enumerate(0, Rows)],
     "</svg>\n"].

sorted(Fns, Opts) ->
    Key = case maps:get(sort, Opts, total) of
              max -> fun(#{returns := #{max := M1}, exceptions := #{max := M2}}) -> max(M1, M2) end;
              total -> fun(#{returns := #{sum := S}}) -> S end
          end,
    lists:sublist(lists:sort(fun({_, A}, {_, B}) -> Key(A) >= Key(B) end, maps:to_list(Fns)),
                  maps:get(max, Opts, 20)).

mfa({M, F, A}) -> lists:flatten(io_lib:format("~tw:~tw/~w", [M, F, A])).

esc(Text) -> tracekit_xml:esc(Text).

int(N) -> integer_to_list(round(N)).

num(X) -> float_to_list(float(X), [{decimals, 2}, compact]).
