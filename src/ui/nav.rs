//! Moving through the lessons: to a lesson and step, the next and previous step, and the presenter's pages
//! (the narration's, then the views') that → and ← turn before the steps.

use super::KvscopeApp;
use crate::lesson_file::At;

impl KvscopeApp {
    /// Go to a lesson (by index) and step; the step's `at` moves the timeline.
    pub fn goto(&mut self, lesson: usize, step: usize) {
        if self.lessons.is_empty() {
            return;
        }
        let lesson = lesson.min(self.lessons.len() - 1);
        // A student's kernel runs its own lesson's views only.
        if lesson != self.cur {
            self.widgets.kernel.exercise.clear_edited();
        }
        self.cur = lesson;
        let steps = self.lessons[self.cur].file.steps.len();
        self.step = step.min(steps.saturating_sub(1));
        self.narration_page = 0;
        self.narration_pages = 1;
        self.view_page = 0;
        self.view_pages = 1;
        self.answer_box = None;
        self.ensure_params();
        let l = &self.lessons[self.cur];
        self.pending_point = None;
        match l
            .file
            .steps
            .get(self.step)
            .and_then(|s| s.at.as_ref())
            .map(|a| a.get_ref())
        {
            Some(At::Step(v)) => {
                let id = l.id().to_string();
                self.cursor.insert(id, (*v).max(0) as usize);
            }
            Some(At::Point(name)) => self.pending_point = Some(name.clone()),
            // A step that names no point opens at the start, so a frame never depends on the steps before.
            None => {
                let id = l.id().to_string();
                self.cursor.insert(id, 0);
            }
        }
        // The step's own settings (`set = { … }`), applied as if the user had moved those controls; a
        // control that another step of the lesson sets goes back to its default on a step that does not
        // (lesson 1's last step switches the trained model on; stepping back switches it off again).
        // In the file's parameter order, so that a control another depends on (the model, before its
        // layer slider) is set first.
        let sets = l.file.steps.get(self.step).map(|s| s.set_params()).unwrap_or_default();
        let mut restore = Vec::new();
        for s in &l.file.steps {
            for (k, _) in s.set_params() {
                if !sets.iter().any(|(o, _)| *o == k)
                    && let Some(p) = l.file.params.iter().find(|p| *p.id.get_ref() == k)
                    && !restore.iter().any(|(o, _): &(String, i64)| *o == k)
                {
                    restore.push((k, p.default_value()));
                }
            }
        }
        // In the file's parameter order, so that a control another depends on (the model, before its
        // layer slider) is set first.
        let mut all: Vec<(String, i64)> = restore.into_iter().chain(sets).collect();
        all.sort_by_key(|(k, _)| l.file.params.iter().position(|p| p.id.get_ref() == k));
        for (k, v) in all {
            self.set_param(&k, v);
        }
    }

    /// Go to a lesson by id.
    pub fn goto_id(&mut self, id: &str, step: usize) -> bool {
        match self.lessons.iter().position(|l| l.id() == id) {
            Some(i) => {
                self.goto(i, step);
                true
            }
            None => false,
        }
    }

    /// Next step (into the next lesson at the end of one).
    pub fn next_step(&mut self) {
        let Some(l) = self.lesson() else { return };
        if self.step + 1 < l.file.steps.len() {
            self.goto(self.cur, self.step + 1);
        } else if self.cur + 1 < self.lessons.len() {
            self.goto(self.cur + 1, 0);
        }
    }

    /// The presenter's next: the narration's next page in presentation mode, then the views' next page,
    /// else the next step.
    pub fn next_page_or_step(&mut self) {
        if self.presentation && self.narration_page + 1 < self.narration_pages {
            self.narration_page += 1;
        } else if self.presentation && self.view_page + 1 < self.view_pages {
            self.view_page += 1;
        } else {
            self.next_step();
        }
    }

    /// The presenter's back: the views' previous page in presentation mode, then the narration's, else
    /// the previous step.
    pub fn prev_page_or_step(&mut self) {
        if self.presentation && self.view_page > 0 {
            self.view_page -= 1;
        } else if self.presentation && self.narration_page > 0 {
            self.narration_page -= 1;
        } else {
            self.prev_step();
        }
    }

    /// Show the views' page `page` (from 0) in presentation mode; a page past the last shows the last.
    pub fn set_view_page(&mut self, page: usize) {
        self.view_page = page;
    }

    /// The views' page shown in presentation mode and how many there are (1 when they fit).
    pub fn view_page(&self) -> (usize, usize) {
        (self.view_page, self.view_pages)
    }

    /// The narration page shown in presentation mode and how many there are (1 when it fits).
    pub fn narration_page(&self) -> (usize, usize) {
        (self.narration_page, self.narration_pages)
    }

    /// Previous step (into the previous lesson's last step).
    pub fn prev_step(&mut self) {
        if self.step > 0 {
            self.goto(self.cur, self.step - 1);
        } else if self.cur > 0 {
            let n = self.lessons[self.cur - 1].file.steps.len();
            self.goto(self.cur - 1, n.saturating_sub(1));
        }
    }
}
