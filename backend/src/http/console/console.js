/*
 * Operator console: the script of the admin listener's console page (GET /admin/console.js,
 * loaded by /admin/console with `defer`). Plain JavaScript, no framework, no build step, no
 * module, nothing fetched from another origin.
 *
 * Three screens (Customer, Queue, Double-charge check) over the console API under
 * /admin/api/, every request with `Authorization: Bearer <operator token>`; the token lives
 * in sessionStorage only. Errors are application/problem+json and are shown with their title
 * and detail. Everything customers can influence (ids, bill ids, details, reasons) reaches the
 * page through textContent and DOM APIs only, never through innerHTML.
 *
 * Deep links: #customer=42, #queue, #check=42 (which only fills the check's form: a check asks
 * the bank and is recorded, so only the operator's own "Run the check" sends one).
 */
(function () {
  'use strict';

  var TOKEN_KEY = 'operator-console.token';
  var API = '/admin/api';
  var SCREENS = ['customer', 'queue', 'check'];
  var TITLE = 'Operator console';
  var CUSTOMER_ID = /^[!-~]{1,255}$/;   // a user: the identity provider's subject (SPEC §3)
  var MAX_REASON_LENGTH = 500;   // the API's bound on an operator's reason

  var EVENT_LABELS = {
    claimed: 'Claimed',
    claimed_again: 'Claimed again (retry after release)',
    replayed: 'Replayed the saved reply',
    mismatch_refused: 'Refused: same key, different request (422)',
    in_progress_refused: 'Refused: first attempt still running (409)',
    waited: 'Waited for the first attempt',
    bank_answered: 'Bank replied',
    bank_answer_unknown: "Bank's reply unknown",
    looked_up: 'Asked the bank',
    released: 'Released (bank never saw it)',
    late_debit_found: 'Late debit found',
    resolved: 'Resolved',
    voided: 'Voided (nothing charged)',
    expired: 'Key expired',
    operator_lookup: 'Operator asked the bank',
    ledger_checked: 'Ledger checked'
  };

  var FINDING_LABELS = {
    double_charge: 'Charged twice',
    bank_moved_we_did_not: 'The bank moved money we did not record',
    we_moved_bank_did_not: 'We recorded money the bank did not move',
    lookup_failed: 'The bank could not be asked'
  };

  var OPERATIONS = { pay_bill: 'Payment', refund_payment: 'Refund' };

  var INR = new Intl.NumberFormat('en-IN', { style: 'currency', currency: 'INR' });

  /* ---------- state ---------- */

  var memoryToken = '';          // used when sessionStorage is not available
  var seq = { customer: 0, queue: 0, check: 0 };
  var shown = { customer: null, check: null }; // the id whose reply is on screen (or loading)
  var current = null;            // the screen on show
  var quietHashChange = null;    // the hash we set ourselves from a form: no focus move
  var reasonDrafts = new Map();  // queue key -> reason typed but not sent (kept across refreshes)
  var askResults = new Map();    // queue key -> the result of its last "ask the bank now"
  var queueRefreshTimer = null;

  /* ---------- small helpers ---------- */

  function $(id) { return document.getElementById(id); }

  /** Makes an element. Attribute values and children are always text, never markup. */
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (name) {
        var value = attrs[name];
        if (value === null || value === undefined || value === false) return;
        if (name === 'class') node.className = value;
        else if (name === 'text') node.textContent = String(value);
        else if (typeof value === 'function') node.addEventListener(name.replace(/^on/, ''), value);
        else node.setAttribute(name, value === true ? '' : String(value));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.append(child instanceof Node ? child : String(child));
  }

  function str(value) {
    return value === null || value === undefined ? '' : String(value);
  }

  /** A class-name-safe form of a word that came from data. */
  function token(word) {
    return str(word).toLowerCase().replace(/[^a-z0-9_-]/g, '-').slice(0, 40) || 'none';
  }

  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  function code(text) { return el('code', null, str(text)); }

  function hiddenText(text) { return el('span', { class: 'visually-hidden' }, text); }

  function money(paise) {
    if (typeof paise === 'string' && /^-?\d+$/.test(paise)) paise = Number(paise);
    if (typeof paise !== 'number' || !isFinite(paise)) return 'an unknown amount';
    return INR.format(paise / 100);
  }

  function operationWord(op) { return OPERATIONS[op] || str(op) || 'Unknown operation'; }

  /**
   * Reads an RFC 3339 time (any number of fractional digits) as UTC parts:
   * {date: "2026-12-01", time: "09:00:00.123", sortKey} or null when it is not one.
   */
  function parseTime(text) {
    if (typeof text !== 'string') return null;
    var m = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?([Zz]|[+-]\d{2}:?\d{2})?$/
      .exec(text.trim());
    if (!m) return null;
    var frac = m[5] || '';
    var ms = (frac + '000').slice(0, 3);
    var micro = Number((frac + '000000').slice(3, 6));
    var zone = (m[6] || 'Z').toUpperCase();
    if (/^[+-]\d{4}$/.test(zone)) zone = zone.slice(0, 3) + ':' + zone.slice(3);
    var d = new Date(m[1] + 'T' + m[2] + ':' + m[3] + ':' + m[4] + '.' + ms + zone);
    if (isNaN(d.getTime())) return null;
    var iso = d.toISOString();
    return { date: iso.slice(0, 10), time: iso.slice(11, 23), sortKey: d.getTime() * 1000 + micro };
  }

  /**
   * A <time> element. options.date: 'always' | 'never' | a date (YYYY-MM-DD) that is not
   * repeated; options.ms: false to drop milliseconds.
   */
  function timeEl(text, options) {
    options = options || {};
    var t = parseTime(text);
    if (!t) return el('span', { class: 'time' }, text ? str(text) : '—');
    var clock = options.ms === false ? t.time.slice(0, 8) : t.time;
    var showDate = options.date === 'always' || (options.date !== 'never' && options.date !== t.date);
    return el('time', { datetime: str(text), class: 'time' },
      (showDate ? t.date + ' ' : '') + clock + ' UTC');
  }

  function todayUtc() { return new Date().toISOString().slice(0, 10); }

  function humanAge(seconds) {
    var s = Number(seconds);
    if (seconds === null || seconds === undefined || !isFinite(s) || s < 0) return '—';
    if (s < 60) return Math.floor(s) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min';
    if (s < 86400) return Math.floor(s / 3600) + ' h';
    return Math.floor(s / 86400) + ' d';
  }

  /** A status or state in words, with a shape and colour that repeat (never replace) them. */
  function badge(word, group) {
    var w = str(word) || 'unknown';
    var attrs = { class: 'badge badge-' + token(w) };
    attrs['data-' + group] = w;
    return el('span', attrs, w);
  }

  /* ---------- live region and messages ---------- */

  var announceTimer = null;

  function announce(text) {
    var live = $('live');
    clearTimeout(announceTimer);
    if (live.textContent === text) {
      // Same words again: empty the region first so screen readers read it once more.
      live.textContent = '';
      announceTimer = setTimeout(function () { live.textContent = text; }, 120);
    } else {
      live.textContent = text;
    }
  }

  function setMessage(screen, kind, content) {
    var box = $(screen + '-message');
    box.replaceChildren();
    box.className = 'message ' + kind;
    append(box, content);
    box.hidden = false;
  }

  function clearMessage(screen) {
    var box = $(screen + '-message');
    box.replaceChildren();
    box.hidden = true;
  }

  /* ---------- the operator token ---------- */

  function getToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return memoryToken; }
  }

  function setToken(value) {
    memoryToken = value;
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* memoryToken keeps it for this page */ }
  }

  function showTokenStatus(stateName, text) {
    var status = $('token-status');
    status.textContent = text;
    status.setAttribute('data-state', stateName);
    $('forget-token').hidden = stateName !== 'set';
  }

  function focusToken() {
    var input = $('token');
    input.focus();
  }

  /** False (after asking for the token) when there is none. */
  function requireToken(screen, what) {
    if (getToken()) return true;
    var text = 'Enter the operator token above, then choose "Use token", ' + what + '.';
    setMessage(screen, 'error', el('p', null, text));
    announce(text);
    focusToken();
    return false;
  }

  /* ---------- the API ---------- */

  function ApiError(problem) {
    this.status = problem.status;
    this.title = problem.title;
    this.detail = problem.detail;
    this.type = problem.type;
    this.field = problem.field;
  }

  function api(method, path, body) {
    var headers = {
      Authorization: 'Bearer ' + getToken(),
      Accept: 'application/json, application/problem+json'
    };
    var init = { method: method, headers: headers, cache: 'no-store', credentials: 'same-origin' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(API + path, init).then(function (response) {
      return response.text().then(function (text) {
        var data = null;
        if (text) { try { data = JSON.parse(text); } catch (e) { data = null; } }
        if (!response.ok) {
          var p = data && typeof data === 'object' ? data : {};
          throw new ApiError({
            status: response.status,
            title: str(p.title) || ('HTTP ' + response.status + (response.statusText ? ' ' + response.statusText : '')),
            detail: str(p.detail),
            type: str(p.type),
            field: str(p.field)
          });
        }
        if (data === null || typeof data !== 'object') {
          throw new ApiError({ status: response.status, title: 'Unexpected reply',
            detail: 'The console API did not reply with JSON.' });
        }
        return data;
      });
    }, function (err) {
      throw new ApiError({ status: 0, title: 'Could not reach the console API',
        detail: str(err && err.message) || 'The request failed before a reply came back.' });
    });
  }

  function isRefused(err) { return err instanceof ApiError && (err.status === 401 || err.status === 403); }

  /** The problem's title and detail as nodes (a bug in this script shows as a problem too). */
  function problemNodes(err) {
    if (!(err instanceof ApiError)) {
      if (window.console) console.error(err);
      return [el('strong', { class: 'problem-title' }, 'Something went wrong in the console'),
        ': ', el('span', { class: 'problem-detail' }, str(err && err.message))];
    }
    return [el('strong', { class: 'problem-title' }, err.title),
      err.detail ? ': ' : null,
      err.detail ? el('span', { class: 'problem-detail' }, err.detail) : null];
  }

  function problemText(err) {
    if (!(err instanceof ApiError)) return 'Something went wrong in the console: ' + str(err && err.message);
    return err.title + (err.detail ? ': ' + err.detail : '');
  }

  /** Shows a failed request on a screen: for 401/403 the token was refused. */
  function showProblem(screen, err, context) {
    if (isRefused(err)) {
      tokenRefused(err);
      setMessage(screen, 'error', [
        el('p', null, el('strong', null, 'The operator token was refused'),
          ' (HTTP ' + err.status + '). Enter a valid token above.'),
        el('p', null, problemNodes(err))
      ]);
      announce('The operator token was refused. ' + problemText(err));
      focusToken();
      return;
    }
    setMessage(screen, 'error', el('p', null, problemNodes(err)));
    announce(context + ': ' + problemText(err));
  }

  function tokenRefused(err) {
    setToken('');
    showTokenStatus('refused', 'Token refused (HTTP ' + err.status + '): enter a valid one');
  }

  /* ---------- screens and deep links ---------- */

  function parseHash(hash) {
    var raw = str(hash).replace(/^#/, '');
    var eq = raw.indexOf('=');
    var name = eq === -1 ? raw : raw.slice(0, eq);
    var id = eq === -1 ? '' : raw.slice(eq + 1);
    try { id = decodeURIComponent(id); } catch (e) { /* keep it as it came */ }
    if (SCREENS.indexOf(name) === -1) return { screen: 'customer', id: '' };
    return { screen: name, id: id.trim() };
  }

  function showScreen(screen) {
    SCREENS.forEach(function (name) {
      $(name).hidden = name !== screen;
      var link = $('nav-' + name);
      if (name === screen) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    });
    current = screen;
    fitScrollBoxes();
  }

  /** A wide table scrolls sideways in its box; a box that does scroll can be reached by Tab. */
  function scrollBox(table, captionId) {
    return el('div', { class: 'table-scroll', 'data-caption': captionId }, table);
  }

  function fitScrollBoxes() {
    var boxes = document.querySelectorAll('.table-scroll');
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box.clientWidth > 0 && box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute('tabindex', '0');
        box.setAttribute('role', 'region');
        box.setAttribute('aria-labelledby', box.getAttribute('data-caption'));
      } else {
        box.removeAttribute('tabindex');
        box.removeAttribute('role');
        box.removeAttribute('aria-labelledby');
      }
    }
  }

  function setTitle(text) { document.title = text ? text + ' — ' + TITLE : TITLE; }

  /** Puts a hash in the address bar for a search the page already started (no second load). */
  function setHashQuietly(hash) {
    if (location.hash === hash) return;
    quietHashChange = hash;
    location.hash = hash;
  }

  function route(options) {
    options = options || {};
    var target = parseHash(location.hash);
    var changed = current !== target.screen;
    showScreen(target.screen);
    if (changed && options.moveFocus) $(target.screen + '-heading').focus();

    if (target.screen === 'customer') {
      setTitle(shown.customer ? 'Customer ' + shown.customer : 'Customer');
      if (target.id && target.id !== shown.customer) {
        $('customer-id').value = target.id;
        loadCustomer(target.id);
      }
    } else if (target.screen === 'queue') {
      setTitle('Queue');
      loadQueue({ quiet: false });
    } else if (target.screen === 'check') {
      setTitle(shown.check ? 'Check ' + shown.check : 'Double-charge check');
      if (target.id && target.id !== shown.check) fillCheckForm(target.id);
    }
  }

  /**
   * What a #check=ID link does: it fills the form and stops there. The check asks the bank and
   * is recorded in the customer's trail, so only the operator's own "Run the check" sends it.
   */
  function fillCheckForm(id) {
    shown.check = null;
    ++seq.check; // a reply still on its way belongs to another customer now
    $('check-results').replaceChildren();
    $('check-customer-id').value = id;
    setMessage('check', 'info', el('p', null, 'Customer ' + id +
      ' is filled in. Give a reason, then choose "Run the check".'));
  }

  function onHashChange() {
    var quiet = quietHashChange !== null && quietHashChange === location.hash;
    quietHashChange = null;
    route({ moveFocus: !quiet });
  }

  function openCustomer(userId) {
    shown.customer = null; // always a fresh look when opened from the queue
    var hash = '#customer=' + encodeURIComponent(userId);
    if (location.hash === hash) route({ moveFocus: true });
    else location.hash = hash;
  }

  /** A customer id from an input, or null after saying what is wrong with it. */
  function readCustomerId(input, screen) {
    var id = input.value.trim();
    if (CUSTOMER_ID.test(id)) {
      input.removeAttribute('aria-invalid');
      return id;
    }
    var text = id ? 'A customer id is the sign-in subject: up to 255 characters, no spaces.' : 'Enter a customer id.';
    input.setAttribute('aria-invalid', 'true');
    setMessage(screen, 'error', el('p', null, text));
    announce(text);
    input.focus();
    return null;
  }

  /* ---------- asking about one customer (Customer and Check screens) ---------- */

  /** The input a problem's `field` points at, on each screen that asks about a customer. */
  var FIELD_INPUTS = {
    customer: { user_id: 'customer-id' },
    check: { user_id: 'check-customer-id', reason: 'check-reason' }
  };

  /**
   * The one way the Customer and Check screens ask the API about customer `id`: the id is
   * checked, the screen's link and title name it, a token is required, then `how.request()`
   * is sent with `how.loading` on show and its reply goes to `how.render(data, id)`, unless the
   * screen has asked again since. A problem is shown on the screen, and an input it names is
   * marked and focused.
   */
  function askAboutCustomer(screen, id, how) {
    var input = $(FIELD_INPUTS[screen].user_id);
    var results = $(screen + '-results');
    var mine = ++seq[screen];
    clearMessage(screen);
    if (!CUSTOMER_ID.test(id)) {
      shown[screen] = null;
      results.replaceChildren();
      input.value = id;
      readCustomerId(input, screen);
      return;
    }
    $('nav-' + screen).setAttribute('href', '#' + screen + '=' + encodeURIComponent(id));
    if (!requireToken(screen, how.need)) {
      shown[screen] = null;
      results.replaceChildren();
      return;
    }
    shown[screen] = id;
    setTitle(how.title);
    results.setAttribute('aria-busy', 'true');
    results.replaceChildren(el('p', { class: 'loading' }, how.loading));
    announce(how.loading);
    how.request().then(function (data) {
      if (mine !== seq[screen]) return;
      how.render(data, id);
    }).catch(function (err) {
      if (mine !== seq[screen]) return;
      shown[screen] = null;
      results.replaceChildren();
      showProblem(screen, err, how.failure);
      var fields = FIELD_INPUTS[screen];
      if (err instanceof ApiError && !isRefused(err) && Object.prototype.hasOwnProperty.call(fields, err.field)) {
        var named = $(fields[err.field]);
        named.setAttribute('aria-invalid', 'true');
        named.focus();
      }
    }).then(function () {
      if (mine === seq[screen]) results.removeAttribute('aria-busy');
    });
  }

  /* ---------- Pages ---------- */

  /**
   * A button that reads the page after `cursor` (`load(cursor)` gives the promise of a page),
   * hands it to `append`, which returns the cursor of the page after it, and hides itself once
   * none follows: every list of the API is paged, so nothing is out of reach.
   */
  function moreButton(id, label, cursor, load, append) {
    var next = cursor;
    var button = el('button', { type: 'button', class: 'more', id: id }, label);
    button.hidden = !next;
    button.addEventListener('click', function () {
      button.disabled = true;
      load(next).then(function (page) {
        next = append(page) || null;
        button.disabled = false;
        button.hidden = !next;
        announce(next ? 'More loaded' : 'Everything is loaded');
      }, function (err) {
        button.disabled = false;
        announce(problemText(err));
      });
    });
    return button;
  }

  /* ---------- Customer screen ---------- */

  function loadCustomer(id) {
    askAboutCustomer('customer', id, {
      need: 'to see customer ' + id,
      title: 'Customer ' + id,
      loading: 'Loading customer ' + id + '…',
      request: function () { return api('GET', '/customers/' + encodeURIComponent(id)); },
      render: renderCustomer,
      failure: 'Customer ' + id
    });
  }

  function renderCustomer(data, id) {
    var results = $('customer-results');
    var userId = str(data.user_id) || id;
    var actions = Array.isArray(data.actions) ? data.actions : [];
    var events = Array.isArray(data.events) ? data.events : [];
    var nodes = [];
    var summary;

    if (actions.length === 0) {
      summary = 'No payments or refunds for customer ' + userId;
      nodes.push(el('p', { class: 'empty', id: 'customer-summary' }, summary));
    } else {
      summary = 'Customer ' + userId + ': ' +
        plural(actions.length, 'payment or refund', 'payments and refunds') +
        (data.next ? ' (the newest; more below)' : '') + ', newest first';
      nodes.push(el('p', { class: 'summary', id: 'customer-summary' }, summary));
      actions.forEach(function (action, i) { nodes.push(renderAction(action, i)); });
      var shown = actions.length;
      var older = moreButton('customer-more', 'Show older payments and refunds', data.next,
        function (cursor) {
          return api('GET', '/customers/' + encodeURIComponent(userId) + '?before=' + encodeURIComponent(cursor));
        },
        function (page) {
          (Array.isArray(page.actions) ? page.actions : []).forEach(function (action) {
            older.before(renderAction(action, shown++));
          });
          return page.next;
        });
      nodes.push(older);
    }
    if (data.events_complete === false) {
      nodes.push(el('p', { class: 'note', id: 'customer-events-incomplete' },
        'Some of these payments have more trail events than one page shows; the whole trail is at ',
        code('/admin/api/customers/' + userId + '/trail'), '.'));
    }

    var operator = el('section', { class: 'operator-events', 'aria-labelledby': 'operator-events-heading' },
      el('h3', { id: 'operator-events-heading', class: 'small-heading' }, 'Operator actions'));
    if (events.length === 0) operator.append(el('p', { class: 'empty' }, 'None'));
    else operator.append(renderTimeline(events, 'always'));
    nodes.push(operator);

    results.replaceChildren.apply(results, nodes);
    announce(summary + (events.length ? '; ' + plural(events.length, 'operator action', 'operator actions') : ''));
  }

  function actionTitle(action) {
    var amount = money(action.amount_paise);
    if (action.operation === 'pay_bill') {
      return 'Payment ' + amount + ' for bill ' + (str(action.bill_id) || '(none)');
    }
    if (action.operation === 'refund_payment') {
      return 'Refund ' + amount + ' of payment ' + (str(action.payment_id) || '(unknown)');
    }
    return operationWord(action.operation) + ' ' + amount;
  }

  function renderAction(action, index) {
    var headingId = 'action-' + index + '-heading';
    var article = el('article', {
      class: 'action action-' + token(action.status),
      'data-action-id': str(action.id),
      'data-operation': str(action.operation),
      'data-status': str(action.status),
      'aria-labelledby': headingId
    });
    article.append(el('h3', { id: headingId, class: 'action-heading' },
      actionTitle(action), ' — ', badge(action.status, 'status')));

    var created = parseTime(action.created_at);
    var details = el('dl', { class: 'facts' });
    function fact(term, value, cls) {
      details.append(el('div', { class: 'fact' + (cls ? ' ' + cls : '') }, el('dt', null, term), el('dd', null, value)));
    }
    fact('Bank reference', action.bank_reference ? code(action.bank_reference) : 'none', 'fact-reference');
    fact(action.operation === 'refund_payment' ? 'Refund id' : 'Payment id', code(action.id), 'fact-id');
    fact('Created', timeEl(action.created_at, { date: 'always' }), 'fact-created');
    if (action.key && typeof action.key === 'object') {
      fact('Key', code(action.key.key), 'fact-key');
      fact('Key state', badge(action.key.state, 'state'), 'fact-key-state');
      fact('Key expires', timeEl(action.key.expires_at, { date: 'always', ms: false }), 'fact-key-expires');
    } else {
      fact('Key', el('span', { class: 'key-expired' },
        'Expired: the key is gone; the movement and its trail remain'), 'fact-key fact-key-gone');
    }
    article.append(details);

    var events = Array.isArray(action.events) ? action.events : [];
    var sorted = sortEvents(events);
    var first = sorted.length ? parseTime(sorted[0].at) : null;
    var day = first ? first.date : created ? created.date : null;
    article.append(el('h4', { class: 'trail-heading' }, 'Trail',
      day ? el('span', { class: 'trail-date' }, ' on ', el('time', { datetime: day }, day), ' (times in UTC)') : null));
    if (events.length === 0) article.append(el('p', { class: 'empty' }, 'No events recorded'));
    else article.append(renderTimeline(sorted, day || 'always', true));
    return article;
  }

  /** Oldest first; events with the same time (or none) keep the order they came in. */
  function sortEvents(events) {
    return events.map(function (e, i) {
      var t = parseTime(e && e.at);
      return { e: e, i: i, k: t ? t.sortKey : null };
    }).sort(function (a, b) {
      if (a.k !== null && b.k !== null && a.k !== b.k) return a.k - b.k;
      return a.i - b.i;
    }).map(function (x) { return x.e; });
  }

  function renderTimeline(events, dateOption, alreadySorted) {
    var list = el('ol', { class: 'timeline' });
    (alreadySorted ? events : sortEvents(events)).forEach(function (event) {
      event = event || {};
      var name = str(event.event);
      var label = Object.prototype.hasOwnProperty.call(EVENT_LABELS, name) ? EVENT_LABELS[name] : name || '(no event name)';
      var item = el('li', { 'data-event': name, class: 'event' });
      item.append(timeEl(event.at, { date: dateOption }), ' ',
        el('span', { class: 'event-label' }, label));
      var repeats = Number(event.repeats);
      if (repeats > 1) item.append(' ', el('span', { class: 'event-repeats' }, repeats + ' times'));
      if (event.detail !== null && event.detail !== undefined && event.detail !== '') {
        item.append(el('span', { class: 'event-detail' }, hiddenText(': '), str(event.detail)));
      }
      var meta = el('span', { class: 'event-meta' });
      if (event.request_id) meta.append(el('span', { class: 'event-request' }, 'request ', code(event.request_id)));
      if (event.operator) {
        meta.append(el('span', { class: 'event-operator' }, 'by ', el('strong', null, str(event.operator))));
      }
      if (event.operator || (event.reason !== null && event.reason !== undefined)) {
        meta.append(el('span', { class: 'event-reason' },
          event.reason ? ['why: ', el('q', null, str(event.reason))] : 'no reason given'));
      }
      if (meta.childNodes.length) item.append(' ', meta);
      list.append(item);
    });
    return list;
  }

  /* ---------- Queue screen ---------- */

  function loadQueue(options) {
    var quiet = options && options.quiet;
    var results = $('queue-results');
    var mine = ++seq.queue;
    clearTimeout(queueRefreshTimer);
    if (!quiet) clearMessage('queue');
    if (!requireToken('queue', 'to see the queue')) { results.replaceChildren(); return; }
    results.setAttribute('aria-busy', 'true');
    if (!quiet) announce('Loading the queue…');
    api('GET', '/queue').then(function (data) {
      if (mine !== seq.queue) return;
      clearMessage('queue');
      renderQueue(data, quiet);
    }).catch(function (err) {
      if (mine !== seq.queue) return;
      showProblem('queue', err, 'The queue');
    }).then(function () {
      if (mine === seq.queue) results.removeAttribute('aria-busy');
    });
  }

  /** Where the focus was in the queue, so a refresh can put it back. */
  function queueFocus() {
    var active = document.activeElement;
    var results = $('queue-results');
    if (!active || !results.contains(active)) return null;
    var row = active.closest('tr[data-key]');
    var spot = { inQueue: true, key: row ? row.getAttribute('data-key') : null, role: active.getAttribute('data-role') };
    if (active.tagName === 'INPUT') { spot.start = active.selectionStart; spot.end = active.selectionEnd; }
    return spot;
  }

  function restoreQueueFocus(spot) {
    if (!spot) return;
    var target = null;
    if (spot.key && spot.role) {
      var rows = $('queue-results').querySelectorAll('tr[data-key]');
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute('data-key') === spot.key) {
          target = rows[i].querySelector('[data-role="' + spot.role + '"]');
          break;
        }
      }
    }
    if (target) {
      target.focus();
      if (target.tagName === 'INPUT' && spot.start !== undefined && spot.start !== null) {
        try { target.setSelectionRange(spot.start, spot.end); } catch (e) { /* not a text input */ }
      }
    } else {
      $('queue-heading').focus();
    }
  }

  function renderQueue(data, quiet) {
    var results = $('queue-results');
    var keys = Array.isArray(data.keys) ? data.keys : [];
    var late = Array.isArray(data.late_debits) ? data.late_debits : [];
    var spot = queueFocus();
    var nodes = [];

    if (keys.length === 0) {
      nodes.push(el('p', { class: 'empty', id: 'queue-empty' }, 'The queue is empty'));
    } else {
      var table = el('table', { class: 'data queue-table', id: 'queue-table' },
        el('caption', null, 'Unfinished keys, oldest first: ' + keys.length),
        el('thead', null, el('tr', null,
          ['Customer and key', 'Operation and state', 'Amount', 'Age', 'Failed look-ups',
            'Next look-up', 'Ask the bank', 'Result'].map(function (h, i) {
            return el('th', { scope: 'col', class: i === 2 || i === 3 || i === 4 ? 'num' : null }, h);
          }))));
      var body = el('tbody');
      keys.forEach(function (entry, i) { body.append(queueRow(entry, i)); });
      table.append(body);
      table.querySelector('caption').id = 'queue-table-caption';
      nodes.push(scrollBox(table, 'queue-table-caption'));
      var rows = keys.length;
      nodes.push(moreButton('queue-more', 'Show more keys', data.next,
        function (cursor) { return api('GET', '/queue?after=' + encodeURIComponent(cursor)); },
        function (page) {
          (Array.isArray(page.keys) ? page.keys : []).forEach(function (entry) {
            body.append(queueRow(entry, rows++));
          });
          fitScrollBoxes();
          return page.next;
        }));
    }

    var lateSection = el('section', { class: 'late-debits', 'aria-labelledby': 'late-debits-heading' },
      el('h3', { id: 'late-debits-heading' }, 'Late debits found'));
    if (late.length === 0) {
      lateSection.append(el('p', { class: 'empty', id: 'late-debits-none' }, 'None'));
    } else {
      var list = el('ul', { class: 'late-list', id: 'late-debits' });
      late.forEach(function (d) { list.append(lateDebitItem(d)); });
      lateSection.append(list);
      lateSection.append(moreButton('late-debits-more', 'Show older late debits', data.late_debits_next,
        function (cursor) { return api('GET', '/late-debits?before=' + encodeURIComponent(cursor)); },
        function (page) {
          (Array.isArray(page.late_debits) ? page.late_debits : []).forEach(function (d) {
            list.append(lateDebitItem(d));
          });
          return page.next;
        }));
    }
    nodes.push(lateSection);

    results.replaceChildren.apply(results, nodes);
    fitScrollBoxes();
    restoreQueueFocus(spot);
    if (!quiet) {
      announce(keys.length === 0
        ? 'The queue is empty; ' + plural(late.length, 'late debit', 'late debits') + ' found'
        : 'Queue: ' + plural(keys.length, 'unfinished key', 'unfinished keys') + ', ' +
          plural(late.length, 'late debit', 'late debits') + ' found');
    }
  }

  /** One late debit, newest first in its list. */
  function lateDebitItem(d) {
    d = d || {};
    var found = d.found || {};
    var userId = str(d.user_id);
    return el('li', { 'data-key': str(d.key), 'data-user-id': userId },
      el('span', { class: 'late-what' }, 'Customer ',
        el('button', { type: 'button', class: 'link customer-link', 'data-user-id': userId,
          onclick: function () { openCustomer(userId); } }, hiddenText('Open customer '), userId),
        d.key ? [', key ', code(d.key)] : ', key expired',
        d.bank_reference ? [', reference ', code(d.bank_reference)] : null,
        d.amount_paise === null || d.amount_paise === undefined ? null : [', ', money(d.amount_paise)]),
      ' ', el('span', { class: 'late-when' }, 'found ', timeEl(found.at, { date: 'always', ms: false })),
      found.detail ? [' ', el('span', { class: 'late-detail' }, str(found.detail))] : null);
  }

  function queueRow(entry, i) {
    entry = entry || {};
    var key = str(entry.key);
    var userId = str(entry.user_id);
    var today = todayUtc();
    var reasonId = 'queue-reason-' + i;
    var resultId = 'queue-result-' + i;

    var reason = el('input', { id: reasonId, class: 'reason', type: 'text', autocomplete: 'off',
      maxlength: MAX_REASON_LENGTH, 'data-role': 'reason', 'aria-describedby': resultId });
    reason.value = reasonDrafts.get(key) || '';
    var result = el('td', { class: 'result', id: resultId });
    var previous = askResults.get(key);
    if (previous) setResult(result, previous);

    var row = el('tr', { 'data-key': key, 'data-user-id': userId, 'data-state': str(entry.state) });
    var ask = el('button', { type: 'button', class: 'ask-bank', 'data-role': 'ask' }, 'Ask the bank now');
    reason.addEventListener('input', function () {
      reasonDrafts.set(key, reason.value);
      if (reason.value.trim()) reason.removeAttribute('aria-invalid');
    });
    reason.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); askBank(row, entry, reason, ask, result); }
    });
    ask.addEventListener('click', function () { askBank(row, entry, reason, ask, result); });

    var next = parseTime(entry.next_lookup_at);
    row.append(
      el('td', { class: 'who' },
        el('button', { type: 'button', class: 'link customer-link', 'data-role': 'customer',
          'data-user-id': userId, onclick: function () { openCustomer(userId); } },
        hiddenText('Open customer '), userId),
        el('span', { class: 'key' }, hiddenText(', key '), code(key))),
      el('td', { class: 'what' }, el('span', { class: 'operation' }, operationWord(entry.operation)),
        hiddenText(', state '), ' ', badge(entry.state, 'state')),
      el('td', { class: 'num' }, money(entry.amount_paise)),
      el('td', { class: 'num' }, el('span', { title: entry.claimed_at ? 'claimed ' + entry.claimed_at : null },
        humanAge(entry.age_seconds))),
      el('td', { class: 'num' }, str(entry.failed_lookups === undefined || entry.failed_lookups === null ? '—' : entry.failed_lookups)),
      el('td', null, entry.settlement_due_at
        ? el('span', { title: 'every status check the rail allows was made: the bank\'s settlement file decides' },
          'settlement file, ', timeEl(entry.settlement_due_at, { date: 'always', ms: false }))
        : entry.next_lookup_at
          ? timeEl(entry.next_lookup_at, { date: next && next.date === today ? 'never' : 'always', ms: false })
          : '—'),
      el('td', { class: 'ask' },
        el('label', { class: 'visually-hidden', for: reasonId }, 'Reason'),
        reason, ask),
      result);
    return row;
  }

  /**
   * An ask's result: `result` is the API's word (resolved, released, voided, not_yet,
   * already_final), or pending or error before or instead of one; `kind` picks the look.
   */
  function askResult(result, kind, text) { return { result: result, kind: kind, text: text }; }

  function failed(text) { return askResult('error', 'error', text); }

  function setResult(cell, asked) {
    cell.replaceChildren(el('span', { class: 'result-text result-' + asked.kind }, asked.text));
    cell.setAttribute('data-result', asked.result);
  }

  /** A key the bank's reply finished: its row stays, with the new state, until a refresh. */
  function showRowState(row, state) {
    row.setAttribute('data-state', state);
    row.querySelector('.what .badge').replaceWith(badge(state, 'state'));
  }

  var ASK_WORDS = {
    released: 'Released: the bank never saw it',
    voided: 'Voided: nothing charged',
    not_yet: 'Not yet: the bank has no reply; asked again later',
    already_final: 'Already final'
  };

  function askWords(reply) {
    var result = str(reply && reply.result);
    if (result === 'resolved') return 'Resolved: ' + (str(reply.status) || str(reply.state) || 'done');
    if (Object.prototype.hasOwnProperty.call(ASK_WORDS, result)) return ASK_WORDS[result];
    return 'Reply: ' + (result || 'none');
  }

  function askBank(row, entry, reasonInput, button, cell) {
    var key = str(entry.key);
    var userId = str(entry.user_id);
    if (button.getAttribute('aria-disabled') === 'true') return;
    var reason = reasonInput.value.trim();
    if (!reason) {
      setResult(cell, failed('Give a reason'));
      askResults.delete(key);
      reasonInput.setAttribute('aria-invalid', 'true');
      reasonInput.focus();
      announce('Give a reason before asking the bank about key ' + key);
      return;
    }
    if (!getToken()) {
      requireToken('queue', 'to ask the bank');
      return;
    }
    button.setAttribute('aria-disabled', 'true');
    button.textContent = 'Asking the bank…';
    setResult(cell, askResult('pending', 'pending', 'Asking the bank…'));
    var path = '/customers/' + encodeURIComponent(userId) + '/keys/' + encodeURIComponent(key) + '/ask-bank';
    api('POST', path, { reason: reason }).then(function (reply) {
      var result = str(reply.result) || 'none';
      var notYet = result === 'not_yet';
      var replied = askResult(result, notYet ? 'wait' : 'ok', askWords(reply));
      askResults.set(key, replied);
      reasonDrafts.delete(key);
      setResult(cell, replied);
      announce('Customer ' + userId + ', key ' + key + ': ' + replied.text);
      if (notYet) {
        // Its next look-up moved: show the queue as it is now.
        clearTimeout(queueRefreshTimer);
        queueRefreshTimer = setTimeout(function () { loadQueue({ quiet: true }); }, 1000);
      } else if (reply.state) {
        showRowState(row, str(reply.state));
      }
    }).catch(function (err) {
      if (isRefused(err)) {
        setResult(cell, failed('The operator token was refused'));
        showProblem('queue', err, 'Ask the bank');
        return;
      }
      var text = err instanceof ApiError && err.status === 409
        ? (err.detail || err.title || 'Another reconciler holds this key')
        : problemText(err);
      askResults.set(key, failed(text));
      setResult(cell, failed(text));
      announce('Customer ' + userId + ', key ' + key + ': ' + text);
    }).then(function () {
      button.removeAttribute('aria-disabled');
      button.textContent = 'Ask the bank now';
    });
  }

  /* ---------- Double-charge check screen ---------- */

  function runCheck(id, reason) {
    askAboutCustomer('check', id, {
      need: 'to check customer ' + id,
      title: 'Check ' + id,
      loading: 'Asking the bank about every movement of customer ' + id + '…',
      request: function () {
        return api('POST', '/customers/' + encodeURIComponent(id) + '/ledger-check', { reason: reason });
      },
      render: renderCheck,
      failure: 'The check of customer ' + id
    });
  }

  function compareEntry(entry, flaggedBy) {
    var ours = str(entry.our_status);
    var bank = str(entry.bank_status);
    if (bank === 'lookup_failed') return { ok: false, text: 'Unknown: the bank could not be asked' };
    var weMoved = ours === 'succeeded';
    var bankMoved = bank === 'succeeded';
    if (weMoved && !bankMoved) return { ok: false, text: 'Mismatch: we recorded money the bank did not move' };
    if (!weMoved && bankMoved) return { ok: false, text: 'Mismatch: the bank moved money we did not record' };
    if (flaggedBy) return { ok: false, text: 'Problem: ' + flaggedBy };
    return { ok: true, text: 'Matches' };
  }

  function renderCheck(data, id) {
    var results = $('check-results');
    var userId = str(data.user_id) || id;
    var findings = Array.isArray(data.findings) ? data.findings : [];
    var entries = Array.isArray(data.entries) ? data.entries : [];
    var checked = Number(data.movements_checked);
    if (!isFinite(checked)) checked = entries.length;
    var complete = data.complete !== false;
    var clean = data.clean === true && complete && findings.length === 0;

    var verdictText = clean
      ? 'No double charge found: ' + plural(checked, 'movement matches', 'movements match') + ' the bank'
      : !complete && findings.length === 0
        ? 'Check incomplete: ' + plural(checked, 'movement', 'movements') + ' checked, nothing found in them' +
          (data.older_movements_unchecked ? '; older movements were not checked' : '; some look-ups failed')
        : 'Problems found: ' + findings.length + (complete ? '' : ' (the check is incomplete)');
    var verdict = el('p', { id: 'check-verdict', class: 'verdict ' + (clean ? 'verdict-clean' : 'verdict-problems'),
      'data-clean': clean ? 'true' : 'false' }, verdictText);
    var meta = el('p', { class: 'check-meta' }, 'Customer ' + userId + ', checked ',
      timeEl(data.checked_at, { date: 'always', ms: false }), '; ' +
      plural(checked, 'movement', 'movements') + ' asked about.');

    var flagged = new Map(); // reference -> the label of the first finding naming it
    var list = el('ul', { id: 'findings', class: 'findings' });
    findings.forEach(function (f) {
      f = f || {};
      var kind = str(f.kind);
      var label = Object.prototype.hasOwnProperty.call(FINDING_LABELS, kind) ? FINDING_LABELS[kind] : kind || 'Finding';
      var refs = Array.isArray(f.references) ? f.references : [];
      refs.forEach(function (r) { if (!flagged.has(str(r))) flagged.set(str(r), label); });
      list.append(el('li', { 'data-finding': kind, class: 'finding finding-' + token(kind) },
        el('strong', { class: 'finding-label' }, label), hiddenText(': '), ' ',
        el('span', { class: 'finding-detail' }, str(f.detail)),
        refs.length ? el('span', { class: 'finding-refs' }, 'References: ',
          refs.map(function (r, i) { return [i ? ', ' : '', code(r)]; })) : null));
    });
    var findingsSection = el('section', { class: 'check-findings', 'aria-labelledby': 'findings-heading' },
      el('h3', { id: 'findings-heading' }, 'Findings'));
    if (findings.length === 0) {
      list.hidden = true;
      findingsSection.append(el('p', { class: 'empty' }, 'None'));
    }
    findingsSection.append(list);

    var entriesSection = el('section', { class: 'check-entries', 'aria-labelledby': 'entries-heading' },
      el('h3', { id: 'entries-heading' }, 'Movements'));
    if (entries.length === 0) {
      entriesSection.append(el('p', { class: 'empty' }, 'No movements to compare'));
    } else {
      var table = el('table', { class: 'data entries-table', id: 'check-entries' },
        el('caption', { id: 'check-entries-caption' }, 'Our records beside the bank\'s replies: ' + entries.length),
        el('thead', null, el('tr', null,
          ['Reference', 'Operation', 'Bill', 'Amount', 'Ours', 'Bank', 'Compared'].map(function (h, i) {
            return el('th', { scope: 'col', class: i === 3 ? 'num' : null }, h);
          }))));
      var body = el('tbody');
      entries.forEach(function (e) {
        e = e || {};
        var c = compareEntry(e, flagged.get(str(e.reference)));
        body.append(el('tr', { 'data-reference': str(e.reference), 'data-match': c.ok ? 'true' : 'false',
          class: c.ok ? 'match' : 'mismatch' },
        el('td', null, code(e.reference)),
        el('td', null, operationWord(e.operation)),
        el('td', { class: 'bill' }, e.bill_id ? code(e.bill_id) : '—'),
        el('td', { class: 'num' }, money(e.amount_paise)),
        el('td', null, badge(e.our_status, 'status')),
        el('td', null, badge(e.bank_status, 'status')),
        el('td', { class: 'compared' }, el('span', { class: c.ok ? 'ok-text' : 'problem-text' }, c.text))));
      });
      table.append(body);
      entriesSection.append(scrollBox(table, 'check-entries-caption'));
    }

    results.replaceChildren(verdict, meta, findingsSection, entriesSection);
    fitScrollBoxes();
    announce('Customer ' + userId + ': ' + verdictText);
  }

  /* ---------- wiring ---------- */

  function init() {
    showTokenStatus(getToken() ? 'set' : 'unset', getToken() ? 'Token set' : 'No token set');

    $('token-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var input = $('token');
      var value = input.value.trim();
      if (!value) {
        showTokenStatus(getToken() ? 'set' : 'unset', getToken() ? 'Token set (enter a new one to replace it)' : 'Enter the operator token first');
        announce('Enter the operator token first');
        input.focus();
        return;
      }
      setToken(value);
      input.value = '';
      showTokenStatus('set', 'Token set');
      announce('Token set');
      SCREENS.forEach(clearMessage);
      route({ moveFocus: false }); // run what the page was waiting for
    });

    $('forget-token').addEventListener('click', function () {
      setToken('');
      showTokenStatus('unset', 'No token set');
      announce('Token forgotten');
      focusToken();
    });

    $('customer-form').addEventListener('submit', function (e) {
      e.preventDefault();
      clearMessage('customer');
      var id = readCustomerId($('customer-id'), 'customer');
      if (id === null) return;
      loadCustomer(id);
      setHashQuietly('#customer=' + encodeURIComponent(id));
    });

    $('check-form').addEventListener('submit', function (e) {
      e.preventDefault();
      clearMessage('check');
      $('check-reason').removeAttribute('aria-invalid');
      var id = readCustomerId($('check-customer-id'), 'check');
      if (id === null) return;
      var reason = $('check-reason').value.trim();
      if (!reason) {
        var text = 'Give a reason for the check: it is recorded in the customer\'s trail.';
        $('check-reason').setAttribute('aria-invalid', 'true');
        setMessage('check', 'error', el('p', null, text));
        announce(text);
        $('check-reason').focus();
        return;
      }
      runCheck(id, reason);
      setHashQuietly('#check=' + encodeURIComponent(id));
    });

    $('refresh-queue').addEventListener('click', function () { loadQueue({ quiet: false }); });

    window.addEventListener('hashchange', onHashChange);
    var resizeTimer = null;
    window.addEventListener('resize', function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(fitScrollBoxes, 150);
    });

    route({ moveFocus: false });
    if (!getToken() && !document.activeElement.closest('main')) focusToken();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
