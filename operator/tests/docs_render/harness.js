// Opens every page of the built book in a frame, at each width of window.BOOK_WIDTHS, and
// measures what overflows its content column; then types window.SEARCH_WORD into the search
// box of window.SEARCH_FROM and reads the result links. Writes what it found, as JSON, into
// body[data-results] for `--dump-dom` (operator/tests/docs_render.rs).
//
// Why elements and not document.documentElement.scrollWidth: mdBook's layout hides horizontal
// overflow on its page wrapper, so the page's scrollWidth stays at the window's width even
// when a 900 px box sticks out of the text (it is cut off, not scrollable). An element of
// <main> that ends past <main>'s right edge, or whose content is wider than its box, is what a
// reader sees cut off. Elements inside a box that scrolls on its own (mdBook's table wrapper,
// a code block: overflow-x auto) are that box's to scroll, and the box itself must fit.
(function () {
  var pages = window.BOOK_PAGES, widths = window.BOOK_WIDTHS, word = window.SEARCH_WORD;
  var frame = document.getElementById('page');
  var results = { pages: [], search: null };
  function describe(el) {
    var text = (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 80);
    return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '') +
      ' "' + text + '"';
  }
  function scrollsItself(el, main) {
    for (var a = el.parentElement; a && a !== main; a = a.parentElement) {
      var o = a.ownerDocument.defaultView.getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll') return true;
    }
    return false;
  }
  function measure(doc, win, page, width) {
    var main = doc.querySelector('main');
    var out = { page: page, width: width, innerWidth: win.innerWidth,
                scrollWidth: doc.documentElement.scrollWidth, overflowing: [] };
    if (!main) { out.overflowing.push('no <main>'); return out; }
    var mr = main.getBoundingClientRect();
    out.mainRight = mr.right;
    if (mr.right > win.innerWidth + 1) out.overflowing.push('main ends at ' + Math.round(mr.right) + ' px');
    var all = main.querySelectorAll('*');
    for (var i = 0; i < all.length && out.overflowing.length < 8; i++) {
      var el = all[i];
      if (scrollsItself(el, main)) continue;
      var r = el.getBoundingClientRect();
      var style = win.getComputedStyle(el);
      var past = r.width > 0 && r.right > mr.right + 1;
      var spills = el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 &&
        style.overflowX === 'visible';
      if (past || spills) {
        out.overflowing.push(describe(el) + ': right ' + Math.round(r.right) + ' of ' +
          Math.round(mr.right) + ', content ' + el.scrollWidth + ' in ' + el.clientWidth);
      }
    }
    return out;
  }
  var queue = [];
  widths.forEach(function (w) { pages.forEach(function (p) { queue.push([p, w]); }); });
  function next() {
    var item = queue.shift();
    if (!item) { search(); return; }
    frame.style.width = item[1] + 'px';
    frame.onload = function () {
      setTimeout(function () {
        results.pages.push(measure(frame.contentDocument, frame.contentWindow, item[0], item[1]));
        next();
      }, 50); // let the theme's scripts (sidebar, highlighting) run first
    };
    frame.src = item[0];
  }
  function search() {
    frame.style.width = '1400px';
    frame.onload = function () {
      var doc = frame.contentDocument;
      var toggle = doc.getElementById('mdbook-search-toggle');
      var bar = doc.getElementById('mdbook-searchbar');
      if (!toggle || !bar) { results.search = { error: 'no search toggle or search bar' }; done(); return; }
      toggle.click();
      var tries = 0;
      (function type() {
        bar.value = word;
        bar.dispatchEvent(new frame.contentWindow.KeyboardEvent('keyup', { bubbles: true }));
        var links = Array.prototype.map.call(
          doc.querySelectorAll('#mdbook-searchresults li a'), function (a) { return a.getAttribute('href'); });
        if (links.length > 0 || ++tries > 100) { // the index loads once, within 10 s
          var header = doc.getElementById('mdbook-searchresults-header');
          results.search = { links: links, header: header ? header.textContent : null, tries: tries };
          done();
        } else {
          setTimeout(type, 100);
        }
      })();
    };
    frame.src = window.SEARCH_FROM;
  }
  function done() { document.body.setAttribute('data-results', JSON.stringify(results)); }
  next();
})();
